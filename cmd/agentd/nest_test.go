package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// The startup Rule-of-Two gate over the root grant: the trifecta is bad config
// (naming --allow-trifecta) unless overridden; untagged counts as
// untrusted_input.
func TestRuleOfTwoStartupGate(t *testing.T) {
	tags := map[api.ToolRef]api.ToolTags{
		{Server: "vault", Tool: "read"}:  {Sensitive: true},
		{Server: "mail", Tool: "send"}:   {Egress: true},
		{Server: "web", Tool: "fetch"}:   {UntrustedInput: true},
		{Server: "notes", Tool: "write"}: {},
	}
	tagger := supervisor.ToolTagger(func(r api.ToolRef) (api.ToolTags, bool) { v, ok := tags[r]; return v, ok })
	ref := func(s, t string) api.ToolRef { return api.ToolRef{Server: s, Tool: t} }
	for _, tc := range []struct {
		name  string
		grant []api.ToolRef
		allow bool
		want  bool
	}{
		{"no tools", nil, false, false},
		{"two legs", []api.ToolRef{ref("vault", "read"), ref("mail", "send"), ref("notes", "write")}, false, false},
		{"three legs", []api.ToolRef{ref("vault", "read"), ref("mail", "send"), ref("web", "fetch")}, false, true},
		{"an untagged tool is untrusted input", []api.ToolRef{ref("vault", "read"), ref("mail", "send"), ref("misc", "x")}, false, true},
		{"allowed", []api.ToolRef{ref("vault", "read"), ref("mail", "send"), ref("web", "fetch")}, true, false},
	} {
		err := checkRuleOfTwo(tc.grant, tagger, tc.allow)
		if tc.want != (err != nil) || (err != nil && !strings.Contains(err.Error(), "--allow-trifecta")) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A bad cap exits 2 with a message naming its flag, before anything starts.
func TestCapFlagsAreValidated(t *testing.T) {
	for flag, value := range map[string]string{
		"--max-depth":           "0",
		"--max-children":        "257",
		"--max-total-subagents": "5000",
		"--max-inflight":        "-3",
		"--spawn-burst":         "0",
		"--spawn-rate":          "1e9",
		"--tree-token-ceiling":  "-1",
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"serve", flag, value}, &stderr, &stderr)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != api.ExitUsage || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s %s: %v", flag, value, err)
		}
	}
}

// A bad environment value is bad config naming the variable.
func TestEnvironmentIsValidated(t *testing.T) {
	for env, value := range map[string]string{
		"AGENT_MAX_TOKENS":     "lots",
		"AGENT_SPAWN_RATE":     "fast",
		"AGENT_ALLOW_TRIFECTA": "maybe",
		"AGENT_PING_INTERVAL":  "often",
		"AGENT_PEERS":          "b",
		"AGENT_ROUTES":         "nonsense",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, value)
			_, err := parseServe(nil, &bytes.Buffer{})
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != api.ExitUsage || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%s: %v", env, value, err)
			}
		})
	}
}
