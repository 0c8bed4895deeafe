// Package client is agentd's client commands: `agentd send`, which sends a
// message to an A2A agent and, for an agentd peer, shows its tree's progress
// on stderr, and `agentd ctl`, which calls an a2a.* operator method (with
// `ctl a2a.Tree --watch`, the console's snapshot stream drawn as it changes).
// Each goes config -> build -> run like the service's commands (package
// main, which dispatches to Send and Ctl): a plain config struct filled by
// its flags and checked by a pure Validate, then the HTTP client its
// credentials make, then the call.
package client
