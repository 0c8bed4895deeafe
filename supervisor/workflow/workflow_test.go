package workflow

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

func TestParse(t *testing.T) {
	steps, err := Parse([]byte(`{"steps": [
	  {"name": "fetch", "objective": "List the open issues", "scope": ["github/list_issues"], "provider": "peer:b"},
	  {"name": "triage", "objective": "Group them", "format": "markdown", "needs": ["fetch"],
	   "limits": {"max_steps": 10, "deadline": "2m"}, "seed": [{"label": "project", "content": {"text": "agentd"}}]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Name != "fetch" || steps[1].Needs[0] != "fetch" {
		t.Fatalf("steps %+v", steps)
	}
	f := steps[0].Spawn
	if f.Contract.OutputFormat.Kind != api.FormatText || f.Scope.Allow[0] != (api.ToolRef{Server: "github", Tool: "list_issues"}) || f.Provider != "peer:b" {
		t.Fatalf("fetch %+v", f)
	}
	tr := steps[1].Spawn
	if tr.Contract.OutputFormat.Kind != api.FormatMarkdown || tr.Limits.MaxSteps != 10 || tr.Limits.Deadline.D() != 2*time.Minute || tr.Seed.Slices[0].Label != "project" {
		t.Fatalf("triage %+v", tr)
	}
}

// Every bad file is refused with a message naming what is wrong.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"steps": []}`, "no steps"},
		{`{"steps": [{"name": "a", "objective": "x", "colour": "red"}]}`, `unknown field "colour"`},
		{`{"steps": [{"name": "a", "objective": "x"}]} {}`, "trailing data"},
		{`{"steps": [{"name": "a", "objective": "x", "needs": ["b"]}]}`, `step "a": needs "b": no step has that name`},
		{`{"steps": [{"name": "a", "objective": "x", "needs": ["c"]}, {"name": "b", "objective": "x", "needs": ["a"]}, {"name": "c", "objective": "x", "needs": ["b"]}]}`, "a cycle of needs: a -> c -> b -> a"},
		{`{"steps": [{"name": "a", "objective": "x", "needs": ["a"]}]}`, "needs itself"},
		{`{"steps": [{"name": "a", "objective": "x"}, {"name": "a", "objective": "y"}]}`, `step "a" is named twice`},
		{`{"steps": [{"name": "a b", "objective": "x"}]}`, `name "a b"`},
		{`{"steps": [{"name": "a", "objective": ""}]}`, "objective"},
		{`{"steps": [{"name": "a", "objective": "x", "format": "yaml"}]}`, "yaml"},
		{`{"steps": [{"name": "a", "objective": "x", "scope": ["nope"]}]}`, `scope "nope"`},
		{`{"steps": [{"name": "a", "objective": "x", "limits": {"max_steps": -1}}]}`, "must not be negative"},
		{`{"steps": [{"name": "a", "objective": "x", "limits": {"deadline": "48h"}}]}`, "exceeds the maximum"},
		{`{"steps": [{"name": "a", "objective": "x", "seed": [{"label": "", "content": {"text": "t"}}]}]}`, "missing label"},
		{`[1]`, "workflow:"},
	} {
		_, err := Parse([]byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error with %q", tc.src, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"steps": [{"name": "a", "objective": "x"}, {"name": "b", "objective": "y", "needs": ["a"]}]}`))
	f.Add([]byte(`{"steps": [{"name": "a", "objective": "x", "needs": ["a"]}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		steps, err := Parse(src)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, s := range steps {
			names[s.Name] = true
			if err := s.Spawn.Contract.Validate(); err != nil {
				t.Fatalf("accepted an invalid contract: %v", err)
			}
		}
		for _, s := range steps {
			for _, n := range s.Needs {
				if !names[n] {
					t.Fatalf("accepted an unknown need %q", n)
				}
			}
		}
	})
}
