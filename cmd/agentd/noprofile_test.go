package main

import (
	"testing"

	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/noprofile"
)

// TestNoProfileKnowsTheMemDump: internal/noprofile, which imports nothing of
// agentd's so that it initializes early, spells the memory dump's variable
// again; the two must agree, or a child asked for its heap profile would
// have none.
func TestNoProfileKnowsTheMemDump(t *testing.T) {
	if noprofile.EnvMemDump != agent.EnvMemDump {
		t.Fatalf("noprofile.EnvMemDump %q, agent.EnvMemDump %q", noprofile.EnvMemDump, agent.EnvMemDump)
	}
}
