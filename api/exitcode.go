package api

import (
	"fmt"
	"strings"
)

// Exit codes of a one-shot run and of the service. One table, printed by
// `agentd --help`.
const (
	ExitOK                      = 0   // completed, or a clean drain
	ExitFailure                 = 1   // crashed, cancelled, or any other failure
	ExitUsage                   = 2   // usage error or bad config
	ExitPartial                 = 3   // exhausted_steps, stalled, loop_detected (partial distillate)
	ExitIntelligenceUnreachable = 4   // the intelligence endpoint could not be reached
	ExitRefused                 = 5   // the model refused
	ExitMCPUnavailable          = 6   // a required MCP server is down
	ExitBudget                  = 7   // exhausted_tokens, or the tree-token ceiling
	ExitDeadline                = 124 // the deadline passed
	ExitUncleanDrain            = 143 // a process would not reap inside the drain budget
	// ExitInputRequired is `agentd send`'s when the task waits for an answer
	// and none can be given: no --answer left and stdin not a terminal.
	ExitInputRequired = 8
)

// ExitCodes is the exit-code table in order, for help output and docs.
var ExitCodes = []struct {
	Code    int
	Meaning string
}{
	{ExitOK, "completed, or a clean drain"},
	{ExitFailure, "crashed, cancelled, or another failure"},
	{ExitUsage, "usage error or bad config (the message names the setting)"},
	{ExitPartial, "partial: exhausted_steps, stalled or loop_detected, with a partial distillate"},
	{ExitIntelligenceUnreachable, "the intelligence endpoint is unreachable"},
	{ExitRefused, "refused"},
	{ExitMCPUnavailable, "a required MCP server is down"},
	{ExitBudget, "budget: exhausted_tokens or the tree-token ceiling"},
	{ExitInputRequired, "send: the task waits for an answer (input-required or auth-required) and none was given"},
	{ExitDeadline, "deadline"},
	{ExitUncleanDrain, "unclean drain: a process would not reap in time"},
}

// ExitCode maps a root subagent's result to the process exit code of a
// one-shot run.
func ExitCode(r SubagentResult) int {
	switch r.Cause {
	case CauseIntelligenceUnreachable:
		return ExitIntelligenceUnreachable
	case CauseMCPUnavailable:
		return ExitMCPUnavailable
	case CauseTreeTokenCeiling:
		return ExitBudget
	}
	switch {
	case r.Status == StatusCompleted:
		return ExitOK
	case r.Status == StatusRefused:
		return ExitRefused
	case r.Status.Partial():
		return ExitPartial
	case r.Status == StatusExhaustedTokens:
		return ExitBudget
	case r.Status == StatusDeadline:
		return ExitDeadline
	default:
		return ExitFailure
	}
}

// ExitCodeTable formats the table for help output.
func ExitCodeTable() string {
	var b strings.Builder
	for _, e := range ExitCodes {
		fmt.Fprintf(&b, "  %3d  %s\n", e.Code, e.Meaning)
	}
	return b.String()
}
