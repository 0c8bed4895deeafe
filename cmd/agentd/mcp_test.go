package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/a2a/peer"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
)

// parseCore fills the shared settings from args as `agentd run` would, and
// validates them.
func parseCore(t *testing.T, args ...string) (*coreConfig, error) {
	t.Helper()
	f := cli.NewFlags("run", io.Discard, "")
	c := &coreConfig{}
	addCore(f, c)
	if err := f.Parse(args); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func mustPeer(t *testing.T, spec string) peer.Config {
	t.Helper()
	p, err := peer.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRule(t *testing.T, spec string) delegate.Rule {
	t.Helper()
	r, err := delegate.ParseRule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Bad MCP settings are bad config naming the flag, before anything connects.
func TestMCPFlagsAreValidated(t *testing.T) {
	x := "x=https://mcp.example/mcp"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mcp", "no-equals"}, "--mcp"},
		{[]string{"--mcp", "x=http://10.1.2.3/mcp"}, "--mcp"},
		{[]string{"--mcp", "x=http://mcp.example/mcp"}, "--mcp"},
		{[]string{"--mcp", "x=ftp://127.0.0.1/mcp"}, "--mcp"},
		{[]string{"--mcp", "x=https://user:pw@mcp.example/mcp"}, "--mcp"},
		{[]string{"--mcp", "subagent=https://mcp.example/mcp"}, "--mcp"},
		{[]string{"--mcp", "a/b=https://mcp.example/mcp"}, "--mcp"},
		{[]string{"--mcp", x, "--mcp", "x=https://other.example/mcp"}, "--mcp"},
		{[]string{"--mcp", x, "--mcp-tags", "y=egress"}, "--mcp-tags"},
		{[]string{"--mcp", x, "--mcp-tags", "x=evil"}, "--mcp-tags"},
		{[]string{"--mcp", x, "--mcp-tools", "y=a"}, "--mcp-tools"},
		{[]string{"--mcp", x, "--mcp-tools", "x="}, "--mcp-tools"},
		{[]string{"--mcp", x, "--mcp-optional", "y"}, "--mcp-optional"},
		{[]string{"--mcp", x, "--mcp-token-file", "y=/some/file"}, "--mcp-token-file"},
		{[]string{"--mcp", x, "--mcp-token-file", "x"}, "--mcp-token-file"},
		{[]string{"--mcp", x, "--mcp-max-result", "10"}, "--mcp-max-result"},
		{[]string{"--mcp", x, "--mcp-max-result", "99999999"}, "--mcp-max-result"},
		{[]string{"--mcp", x, "--mcp-call-wait", "0s"}, "--mcp-call-wait"},
		{[]string{"--mcp", x, "--mcp-connect-timeout", "-1s"}, "--mcp-connect-timeout"},
		// The startup Rule-of-Two gate: an untagged server counts as
		// untrusted_input, so with a sensitive and an egress tool the root
		// grant holds all three legs.
		{[]string{"--mcp", x, "--mcp", "y=https://y.example/mcp", "--mcp-tags", "x=sensitive", "--mcp-tags", "y/send=egress"}, "--allow-trifecta"},
		{[]string{"--mcp", x, "--mcp-tags", "x=untrusted_input,sensitive,egress"}, "--allow-trifecta"},
		// exec carries sensitive and egress: with an untagged (untrusted)
		// server the root grant holds the trifecta.
		{[]string{"--mcp", x, "--allow-exec"}, "--allow-trifecta"},
	} {
		_, err := parseCore(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// A token file that cannot be read, or holds no single line, is bad config
// found by the build.
func TestMCPTokenFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(dir, "missing"), empty} {
		c, err := parseCore(t, "--mcp", "x=https://mcp.example/mcp", "--mcp-token-file", "x="+file)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		cfg, err := c.MCP.parse()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.MCP.tokens(&cfg); err == nil || !strings.Contains(err.Error(), "--mcp-token-file x") {
			t.Errorf("token file %s: %v", file, err)
		}
	}
}

// Settings that pass the gate: tagging the untagged server, narrowing the
// grant to the egress tool, or the operator's override.
func TestMCPRuleOfTwoPasses(t *testing.T) {
	x, y := "x=https://mcp.example/mcp", "y=https://y.example/mcp"
	for _, args := range [][]string{
		{"--mcp", x, "--mcp", y, "--mcp-tags", "x=sensitive", "--mcp-tags", "y=none", "--mcp-tags", "y/send=egress"},
		{"--mcp", x, "--mcp", y, "--mcp-tags", "x=sensitive", "--mcp-tags", "y/send=egress", "--mcp-tools", "y=send"},
		{"--mcp", x, "--mcp-tags", "x=untrusted_input,sensitive,egress", "--allow-trifecta"},
		{"--mcp", x, "--mcp-tags", "x=none", "--allow-exec"},
		{"--mcp", x, "--allow-exec", "--allow-trifecta"},
		{"--allow-exec"},
	} {
		if _, err := parseCore(t, args...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// The environment forms: AGENT_MCP and friends hold whitespace-separated
// entries, a flag on the command line replaces them, tokens come from
// AGENT_MCP_TOKEN_<NAME> or a token file (which wins).
func TestMCPEnvironment(t *testing.T) {
	t.Setenv("AGENT_MCP", "a=https://a.example/mcp\nb-2=http://127.0.0.1:9/mcp")
	t.Setenv("AGENT_MCP_TAGS", "a=sensitive b-2=none")
	t.Setenv("AGENT_MCP_OPTIONAL", "b-2")
	t.Setenv("AGENT_MCP_TOOLS", "a=read,list")
	t.Setenv("AGENT_MCP_TOKEN_A", "from-env-a")
	t.Setenv("AGENT_MCP_TOKEN_B_2", "from-env-b")
	file := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseCore(t, "--mcp-token-file", "b-2="+file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.MCP.parse()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MCP.tokens(&cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 2 || cfg.Servers[0].Name != "a" || cfg.Servers[1].Name != "b-2" {
		t.Fatalf("servers = %+v", cfg.Servers)
	}
	if cfg.Servers[0].Token != "from-env-a" || cfg.Servers[1].Token != "from-file" {
		t.Errorf("tokens: a %q, b-2 %q", cfg.Servers[0].Token, cfg.Servers[1].Token)
	}
	if cfg.Servers[0].Optional || !cfg.Servers[1].Optional {
		t.Errorf("optional: %+v", cfg.Servers)
	}
	if got := strings.Join(cfg.Grant["a"], ","); got != "read,list" {
		t.Errorf("grant of a = %s", got)
	}
	if tags, ok := cfg.Tagger()(api.ToolRef{Server: "a", Tool: "read"}); !ok || !tags.Sensitive {
		t.Errorf("a's tags = %+v", tags)
	}

	c, err = parseCore(t, "--mcp", "c=https://c.example/mcp", "--mcp-tags", "c=egress", "--mcp-tools", "c=x", "--mcp-optional", "c")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = c.MCP.parse()
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Servers; len(s) != 1 || s[0].Name != "c" || !s[0].Optional {
		t.Fatalf("a flag replaces the environment's list: %+v", s)
	}
}

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
