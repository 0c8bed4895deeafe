// Package api holds agentd's wire contracts: the spawn payload a supervisor hands a
// subagent, the result a subagent hands back, the control-channel frame codec and
// method names, the exit-code table of a one-shot run, and the agentd/
// metadata keys with the predicate that says which a caller may set.
//
// The package is pure: types, validation and encoding, no I/O beyond the
// io.Reader/io.Writer a caller hands the frame codec. Both sides of the process
// tree (package supervisor and package agent) meet only through these types.
// JSON field names are snake_case (docs/ARCHITECTURE.md §4).
package api
