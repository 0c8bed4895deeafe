package supervisor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

// TestGates: --approve's forms parse (a bad one is an error naming the
// forms), and a gate holds exactly the calls it names: exec, one MCP tool,
// a spawn on one peer; nothing by default.
func TestGates(t *testing.T) {
	var g Gates
	for _, s := range []string{"exec", "tool:gh/merge", "peer:b"} {
		if err := g.Add(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	for _, bad := range []string{"", "tool:gh", "peer:", "exec:x", "shell"} {
		if err := g.Add(bad); err == nil || !strings.Contains(err.Error(), "want exec, tool:SERVER/TOOL or peer:NAME") && !strings.Contains(err.Error(), "want tool:SERVER/TOOL") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	spawn := func(provider string) json.RawMessage {
		b, _ := json.Marshal(api.SpawnArgs{Provider: provider})
		return b
	}
	for _, tc := range []struct {
		call api.ToolCall
		want bool
	}{
		{api.ToolCall{Tool: api.ToolExec}, true},
		{api.ToolCall{Tool: "gh/merge"}, true},
		{api.ToolCall{Tool: "gh/search"}, false},
		{api.ToolCall{Tool: api.ToolSpawn, Args: spawn("peer:b")}, true},
		{api.ToolCall{Tool: api.ToolSpawn, Args: spawn("peer:c")}, false},
		{api.ToolCall{Tool: api.ToolSpawn, Args: spawn("")}, false},
		{api.ToolCall{Tool: api.ToolAsk}, false},
	} {
		if got := g.holds(tc.call); got != tc.want {
			t.Errorf("%s %s: holds %v, want %v", tc.call.Tool, tc.call.Args, got, tc.want)
		}
		if (Gates{}).holds(tc.call) {
			t.Errorf("the zero Gates holds %s", tc.call.Tool)
		}
	}
}
