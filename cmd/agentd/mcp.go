package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/mcp"
	"github.com/agentd/agentd/supervisor"
)

// entryList is a repeatable flag whose values keep their commas (an MCP entry
// such as NAME=untrusted_input,sensitive). Its environment variable holds the
// same entries separated by whitespace; the first use of the flag on the
// command line replaces them (a flag beats its environment variable).
type entryList struct {
	vals    []string
	fromEnv bool
}

func (l *entryList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.vals, " ")
}

func (l *entryList) Set(s string) error {
	if l.fromEnv {
		l.vals, l.fromEnv = nil, false
	}
	l.vals = append(l.vals, s)
	return nil
}

// entries defines an entryList flag.
func (f *flags) entries(name, env, usage string) *entryList {
	l := &entryList{}
	if v, ok := os.LookupEnv(env); ok && env != "" {
		l.vals, l.fromEnv = strings.Fields(v), true
	}
	f.Var(l, name, usage+" (repeatable)"+envNote(env))
	return l
}

// mcpFlags configure the MCP tool servers the supervisor holds.
type mcpFlags struct {
	servers        *entryList
	tags           *entryList
	tools          *entryList
	optional       *entryList
	tokenFiles     *entryList
	connectTimeout *time.Duration
	callWait       *time.Duration
	maxResult      *int

	cfg mcp.Config // built by validate
}

// maxMCPResult bounds --mcp-max-result well under the control frame limit.
const maxMCPResult = 1 << 20

func addMCPFlags(f *flags) mcpFlags {
	return mcpFlags{
		servers:        f.entries("mcp", "AGENT_MCP", "an MCP server as NAME=URL (streamable HTTP; https, or http on loopback); its tools are NAME/TOOL"),
		tags:           f.entries("mcp-tags", "AGENT_MCP_TAGS", "Rule-of-Two legs as NAME=LEGS or NAME/TOOL=LEGS, LEGS a comma list of untrusted_input, sensitive, egress, or none; untagged tools count as untrusted_input"),
		tools:          f.entries("mcp-tools", "AGENT_MCP_TOOLS", "narrow the root grant to some tools of a server: NAME=TOOL,TOOL (default every tool it lists)"),
		optional:       f.entries("mcp-optional", "AGENT_MCP_OPTIONAL", "servers (NAME or NAME,NAME) a run starts without when they are down; the others are required"),
		tokenFiles:     f.entries("mcp-token-file", "AGENT_MCP_TOKEN_FILE", "a server's bearer token from a file: NAME=FILE (or set AGENT_MCP_TOKEN_<NAME>; never on argv)"),
		connectTimeout: f.duration("mcp-connect-timeout", "AGENT_MCP_CONNECT_TIMEOUT", 10*time.Second, "run: how long required MCP servers get to connect at start (else exit 6); also bounds each connect attempt"),
		callWait:       f.duration("mcp-call-wait", "AGENT_MCP_CALL_WAIT", 5*time.Second, "how long a tool call waits for an MCP session that is reconnecting before it fails as a tool error"),
		maxResult:      f.int("mcp-max-result", "AGENT_MCP_MAX_RESULT", mcp.DefaultMaxResult, "bytes of an MCP tool result a subagent receives; the rest is cut with a note"),
	}
}

// validate builds the MCP configuration, naming the flag of a bad setting.
// Tokens come from AGENT_MCP_TOKEN_<NAME>, or a token file, which beats it.
func (m *mcpFlags) validate() error {
	var cfg mcp.Config
	byName := map[string]int{}
	for _, v := range m.servers.vals {
		s, err := mcp.ParseServer(v)
		if err != nil {
			return usageError("--mcp: %v", err)
		}
		if _, dup := byName[s.Name]; dup {
			return usageError("--mcp: server %q is configured twice", s.Name)
		}
		s.Token = strings.TrimSpace(os.Getenv(mcp.TokenEnv(s.Name)))
		byName[s.Name] = len(cfg.Servers)
		cfg.Servers = append(cfg.Servers, s)
	}
	known := func(flag, name string) error {
		if _, ok := byName[name]; !ok {
			return usageError("%s: no MCP server %q is configured (with --mcp)", flag, name)
		}
		return nil
	}
	for _, v := range m.tokenFiles.vals {
		name, file, err := mcp.ParseTokenFile(v)
		if err != nil {
			return usageError("--mcp-token-file: %v", err)
		}
		if err := known("--mcp-token-file", name); err != nil {
			return err
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return usageError("--mcp-token-file %s: %v", name, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" || strings.ContainsAny(tok, "\r\n") {
			return usageError("--mcp-token-file %s: want one non-empty line", name)
		}
		cfg.Servers[byName[name]].Token = tok
	}
	for _, v := range m.tags.vals {
		r, err := mcp.ParseTags(v)
		if err != nil {
			return usageError("--mcp-tags: %v", err)
		}
		if err := known("--mcp-tags", r.Server); err != nil {
			return err
		}
		cfg.Tags = append(cfg.Tags, r)
	}
	for _, v := range m.tools.vals {
		name, tools, err := mcp.ParseToolList(v)
		if err != nil {
			return usageError("--mcp-tools: %v", err)
		}
		if err := known("--mcp-tools", name); err != nil {
			return err
		}
		if cfg.Grant == nil {
			cfg.Grant = map[string][]string{}
		}
		cfg.Grant[name] = append(cfg.Grant[name], tools...)
	}
	for _, v := range m.optional.vals {
		for _, name := range strings.Split(v, ",") {
			if err := known("--mcp-optional", strings.TrimSpace(name)); err != nil {
				return err
			}
			cfg.Servers[byName[strings.TrimSpace(name)]].Optional = true
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageError("--mcp: %v", err)
	}
	if *m.connectTimeout <= 0 {
		return usageError("--mcp-connect-timeout must be a positive duration (got %s)", *m.connectTimeout)
	}
	if *m.callWait <= 0 {
		return usageError("--mcp-call-wait must be a positive duration (got %s)", *m.callWait)
	}
	if *m.maxResult < 256 || *m.maxResult > maxMCPResult {
		return usageError("--mcp-max-result %d: want 256 to %d bytes", *m.maxResult, maxMCPResult)
	}
	m.cfg = cfg
	return nil
}

// newMCP creates the MCP servers and starts connecting; with none configured
// it returns nil.
func (c *core) newMCP(log *slog.Logger) (*mcp.Set, error) {
	if len(c.mcp.cfg.Servers) == 0 {
		return nil, nil
	}
	set, err := mcp.NewSet(c.mcp.cfg, mcp.Options{
		Logger:         log,
		ConnectTimeout: *c.mcp.connectTimeout,
		CallWait:       *c.mcp.callWait,
		MaxResult:      *c.mcp.maxResult,
		Version:        version,
	})
	if err != nil {
		return nil, usageError("--mcp: %v", err)
	}
	set.Start()
	return set, nil
}

// waitMCP is the one-shot start: every required MCP server must connect
// within --mcp-connect-timeout, else exit 6; a tool named in --mcp-tools that
// its server does not list is bad config.
func (c *core) waitMCP(ctx context.Context) error {
	if c.tools == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, *c.mcp.connectTimeout)
	defer cancel()
	if err := c.tools.WaitRequired(ctx); err != nil {
		var ue *mcp.UnavailableError
		if errors.As(err, &ue) {
			return &exitError{code: api.ExitMCPUnavailable, err: fmt.Errorf("%v (a server marked --mcp-optional may be down at start)", err)}
		}
		return err
	}
	if _, missing := c.tools.Grant(c.mcp.cfg.Grant); len(missing) > 0 {
		return usageError("--mcp-tools: %s is not a tool its server lists", missing[0])
	}
	return nil
}

// watchMCP is the serve start: the service runs while servers connect; once
// every required one has, it logs so (and any --mcp-tools entry its server
// does not list). It returns when ctx ends.
func (c *core) watchMCP(ctx context.Context, log *slog.Logger) {
	if c.tools == nil {
		return
	}
	if c.tools.WaitRequired(ctx) != nil {
		return
	}
	grant, missing := c.tools.Grant(c.mcp.cfg.Grant)
	for _, ref := range missing {
		log.Warn("--mcp-tools names a tool its server does not list", "tool", ref.String())
	}
	log.Info("mcp servers ready", "tools", len(grant))
}

// mcpReady reports whether every required MCP server has connected once.
func (c *core) mcpReady() bool { return c.tools == nil || c.tools.Ready() }

// closeMCP closes every MCP session.
func (c *core) closeMCP() {
	if c.tools != nil {
		c.tools.Close()
	}
}

// rootGrant is the tools the root of every run holds: every tool the MCP
// servers list (as of now), or the --mcp-tools subset of a server.
func (c *core) rootGrant() []api.ToolRef {
	if c.tools == nil {
		return nil
	}
	grant, _ := c.tools.Grant(c.mcp.cfg.Grant)
	return grant
}

// gateGrant is what the startup Rule-of-Two gate evaluates, before any server
// is reached: a superset of every root grant there can be.
func (c *core) gateGrant() ([]api.ToolRef, supervisor.ToolTagger) {
	return c.mcp.cfg.GateRefs(), c.mcp.cfg.Tagger()
}
