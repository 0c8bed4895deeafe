// Package layout holds the test that keeps the repository's import graph
// to the tiers of docs/ARCHITECTURE.md §2: cmd -> server -> a2a ->
// supervisor -> internal -> api, with tlsconfig a leaf that cmd, server and
// a2a use, and the tests that keep the contracts gathered: every agentd/
// metadata key in api/metadata.go, every interface a store implements in
// a2a/tasks/store.go; and the one that holds sentinel errors to the house
// style's package prefix. It has no code of its own.
package layout
