// Package noprofile turns the Go runtime's heap profile sampling off in the
// process that imports it (agentd: the service, and its children, which get
// the same from their GODEBUG), from the package's init on. Nothing in agentd
// reads a heap profile: there is no pprof endpoint. Sampling still costs
// memory: the first sampled allocation maps the runtime's bucket hash table
// (1.4 MB of address space, whose pages become resident as allocations with
// new stacks are sampled) and each sample keeps a bucket with its stack, so a
// busy supervisor's RSS grew with the number of distinct allocation stacks it
// had seen (issue 35; docs/performance.md, figure 9).
//
// It imports only os, runtime and strings, so that Go's initialization order
// (packages by import path, each once its imports are done) runs it before
// the packages that allocate the most at init (protobuf's and gRPC's
// registries, the SQLite driver, prometheus; 100 KB of agentd's 690 KB of
// init allocations come before it). The runtime records one last sample on
// each P as it next allocates after the change, which maps the table, but
// only those few buckets' pages become resident (16-20 KiB measured, where
// 144 KiB at 50 live children and 250-300 at 200 had). cmd/agentd imports
// it for its side effect.
//
// Sampling stays as configured when GODEBUG sets memprofilerate (the
// operator's choice) or when EnvMemDump is set (a child's memory dump, whose
// heap profile is the point; internal/agent).
package noprofile

import (
	"os"
	"runtime"
	"strings"
)

// EnvMemDump is the memory dump diagnostic's variable, internal/agent's
// EnvMemDump (spelled again here so that this package imports nothing of
// agentd's; cmd/agentd's tests hold the two equal): while it is set, the rate
// is left as the runtime or the dump sets it.
const EnvMemDump = "AGENT_CHILD_MEMDUMP"

func init() {
	if keep(os.Getenv("GODEBUG"), os.Getenv(EnvMemDump)) {
		return
	}
	runtime.MemProfileRate = 0
}

// keep reports whether a process whose GODEBUG is godebug and whose
// EnvMemDump is memdump keeps the runtime's heap profile rate.
func keep(godebug, memdump string) bool {
	if memdump != "" {
		return true
	}
	for kv := range strings.SplitSeq(godebug, ",") {
		if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == "memprofilerate" {
			return true
		}
	}
	return false
}
