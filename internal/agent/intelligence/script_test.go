package intelligence

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

func TestParseScript(t *testing.T) {
	good := `# comment
[default]
answer "leaf"

[depth 1]
call demo/echo {"text": "a b"}
spawn async "look at \"this\"" scope=demo/echo,demo/sum max_tokens=500 max_steps=3 deadline=2s provider=peer:b format=markdown
spawn detach "fire"
await
sleep 10ms
usage 12 3
refuse "no {path}"

[path 0.2.1]
spawn sync "again"
repeat
`
	sc, err := parseScript([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.sections) != 3 {
		t.Fatalf("sections = %d", len(sc.sections))
	}
	d1 := sc.sections[1].steps
	sp := d1[1].spawns[0]
	if sp.Disposition != api.DispositionAsync || sp.Contract.Objective != `look at "this"` || len(sp.Scope.Allow) != 2 ||
		sp.Limits.MaxTokens != 500 || sp.Limits.MaxSteps != 3 || sp.Limits.Deadline.D() != 2*time.Second ||
		sp.Provider != "peer:b" || sp.Contract.OutputFormat.Kind != api.FormatMarkdown {
		t.Fatalf("spawn step = %+v", sp)
	}
	if d1[5].usage != (api.Usage{TokensIn: 12, TokensOut: 3}) || d1[4].d != 10*time.Millisecond || d1[6].text != "no {path}" {
		t.Fatalf("steps = %+v", d1)
	}
	for _, tc := range []struct{ src, want string }{
		{"", "no [section]"},
		{"answer \"x\"", "line 1: a step before any [section]"},
		{"[default]\n[default]", "line 2: section [default] already defined on line 1"},
		{"[depth -1]", "line 1: depth"},
		{"[path 0.x]", "line 1: path"},
		{"[somewhere]", "line 1: a section header"},
		{"[default]\njump", `line 2: unknown step "jump"`},
		{"[default]\ncall", "line 2: call: want a tool name"},
		{"[default]\ncall a/b [1]", "line 2: call: the arguments must be one JSON object"},
		{"[default]\nspawn soon \"x\"", `line 2: spawn: disposition "soon"`},
		{"[default]\nspawn sync", "line 2: spawn: want a disposition and an objective"},
		{"[default]\nspawn sync \"x", "line 2: spawn: unterminated"},
		{"[default]\nspawn sync \"x\" scope=nope", `scope: "nope" is not SERVER/TOOL`},
		{"[default]\nspawn sync \"x\" color=red", `unknown option "color"`},
		{"[default]\nspawn sync \"x\" max_tokens=-1", "want a positive integer"},
		{"[default]\nsleep soon", "line 2: sleep: want a duration"},
		{"[default]\nusage 1 2 3", "line 2: usage: want IN [OUT]"},
		{"[default]\nanswer two words", "line 2: answer: quote the text"},
		{"[default]\nanswer \"x\"\ncall a/b", "line 3: never reached after the step on line 2"},
		{"[default]\nsleep 1s\nrepeat", "line 3: repeat in a section with no call, spawn, answer or refuse"},
		{"[default]\nawait x", "line 2: await: child \"x\": want a number from 1, or nothing"},
		{"[default]\nawait 0", "line 2: await: child \"0\": want a number from 1, or nothing"},
		{"[default]\nrepeat 3", "line 2: repeat: takes no arguments"},
	} {
		_, err := parseScript([]byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}

func FuzzParseScript(f *testing.F) {
	f.Add([]byte("[default]\nanswer \"x\"\n"))
	f.Add([]byte("[depth 0]\nspawn async \"a\\nb\" scope=s/t deadline=1s\nawait\nanswer \"{results}\"\n"))
	f.Add([]byte("[path 0.1]\ncall s/t {\"a\":[1,2]}\nusage 5\nrepeat\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		sc, err := parseScript(src)
		if err != nil {
			return
		}
		for _, sec := range sc.sections {
			for _, st := range sec.steps {
				if st.kind == stepCall && !json.Valid(st.args) {
					t.Fatalf("call step with invalid args %q", st.args)
				}
				for _, a := range st.spawns {
					if _, err := a.Disposition.Normalize(); err != nil {
						t.Fatalf("spawn step with a bad disposition: %v", err)
					}
				}
			}
			if k := len(sec.steps); k > 0 && sec.steps[k-1].kind == stepRepeat {
				turns := false
				for _, st := range sec.steps {
					turns = turns || st.turns()
				}
				if !turns {
					t.Fatal("a repeating section that never makes a turn")
				}
			}
		}
	})
}

// TestScriptWindow: a script declares its context window before any
// section, refuses a request over it as a real model would, and answers a
// compaction call without taking a step.
func TestScriptWindow(t *testing.T) {
	for _, bad := range []string{"window 0\n[default]\n", "[default]\nwindow 10\n", "window 5\nwindow 6\n[default]\n"} {
		if _, err := parseScript([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	sc, err := parseScript([]byte("window 20\n[default]\nanswer \"{system}|{messages}\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptedModel{sc: sc}
	if m.ContextWindow() != 20 {
		t.Fatalf("window %d", m.ContextWindow())
	}
	ctx := context.Background()
	if _, err := m.Complete(ctx, &Request{System: strings.Repeat("x", 100)}); err == nil || !strings.Contains(err.Error(), "exceeds the context window of 20 tokens") {
		t.Fatalf("an oversized request: %v", err)
	}
	sum, err := m.Complete(ctx, &Request{Compaction: true, Messages: []Message{{Role: RoleUser, Content: "older"}}})
	if err != nil || !strings.HasPrefix(sum.Content, "summary of the earlier turns") {
		t.Fatalf("compaction call: %+v %v", sum, err)
	}
	resp, err := m.Complete(ctx, &Request{System: "sys", Messages: []Message{{Role: RoleUser, Content: "go"}}})
	if err != nil || resp.Content != "sys|1" {
		t.Fatalf("the step after the compaction call: %+v %v", resp, err)
	}
}

// TestParseScriptAskSteps: ask (with choices), reply and pass parse, and
// their bad forms name the line and what is wrong.
func TestParseScriptAskSteps(t *testing.T) {
	sc, err := parseScript([]byte("[default]\nask \"Which?\" choices=red,blue\nspawn async \"c\"\nawait\nreply 1 \"{answer}\"\npass 1\nanswer \"x\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := sc.sections[0].steps
	if st[0].kind != stepAsk || st[0].ask.Question != "Which?" || strings.Join(st[0].ask.Choices, "|") != "red|blue" {
		t.Fatalf("ask step = %+v", st[0])
	}
	if st[3].kind != stepReply || st[3].child != 0 || st[3].text != "{answer}" || st[4].kind != stepPass || st[4].child != 0 {
		t.Fatalf("reply, pass steps = %+v %+v", st[3], st[4])
	}
	for _, tc := range []struct{ src, want string }{
		{"[default]\nask", "line 2: ask: want a quoted question"},
		{"[default]\nask \"\"", "line 2: ask: the question is empty"},
		{"[default]\nask \"q\" colors=a", "line 2: ask: want choices=A,B"},
		{"[default]\nask \"q\" choices=a,,b", "line 2: ask: choice"},
		{"[default]\nreply 1", "line 2: reply: want the child's number"},
		{"[default]\nreply 0 \"x\"", "line 2: reply: child \"0\""},
		{"[default]\npass one", "line 2: pass: child \"one\""},
	} {
		_, err := parseScript([]byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}
