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
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/secretfile"
	"github.com/agentd/agentd/supervisor/mcp"
)

// mcpConfig configures the MCP tool servers the supervisor holds. Each list
// holds the flag's entries as given; parse turns them into an mcp.Config.
type mcpConfig struct {
	Servers        []string // --mcp NAME=URL
	Tags           []string // --mcp-tags NAME=LEGS or NAME/TOOL=LEGS
	Tools          []string // --mcp-tools NAME=TOOL,TOOL
	Optional       []string // --mcp-optional NAME[,NAME]
	TokenFiles     []string // --mcp-token-file NAME=FILE
	ConnectTimeout time.Duration
	CallWait       time.Duration
	MaxResult      int
}

// maxMCPResult bounds --mcp-max-result well under the control frame limit.
const maxMCPResult = 1 << 20

// minMCPResult is the smallest --mcp-max-result: room for a short result and
// the note that it was cut.
const minMCPResult = 256

func addMCPFlags(f *cli.Flags, m *mcpConfig) {
	f.EnvEntries(&m.Servers, "mcp", "AGENT_MCP", "an MCP server as NAME=URL (streamable HTTP; https, or http on loopback); its tools are NAME/TOOL")
	f.EnvEntries(&m.Tags, "mcp-tags", "AGENT_MCP_TAGS", "Rule-of-Two legs as NAME=LEGS or NAME/TOOL=LEGS, LEGS a comma list of untrusted_input, sensitive, egress, or none; untagged tools count as untrusted_input")
	f.EnvEntries(&m.Tools, "mcp-tools", "AGENT_MCP_TOOLS", "narrow the root grant to some tools of a server: NAME=TOOL,TOOL (default every tool it lists)")
	f.EnvEntries(&m.Optional, "mcp-optional", "AGENT_MCP_OPTIONAL", "servers (NAME or NAME,NAME) a run starts without when they are down; the others are required")
	f.EnvEntries(&m.TokenFiles, "mcp-token-file", "AGENT_MCP_TOKEN_FILE", "a server's bearer token from a file: NAME=FILE (or set AGENT_MCP_TOKEN_<NAME>; never on argv)")
	f.EnvDuration(&m.ConnectTimeout, "mcp-connect-timeout", "AGENT_MCP_CONNECT_TIMEOUT", 10*time.Second, "run: how long required MCP servers get to connect at start (else exit 6); also bounds each connect attempt")
	f.EnvDuration(&m.CallWait, "mcp-call-wait", "AGENT_MCP_CALL_WAIT", 5*time.Second, "how long a tool call waits for an MCP session that is reconnecting before it fails as a tool error")
	f.EnvInt(&m.MaxResult, "mcp-max-result", "AGENT_MCP_MAX_RESULT", mcp.DefaultMaxResult, "bytes of an MCP tool result a subagent receives; the rest is cut with a note")
}

// parse builds the MCP configuration without its tokens, naming the flag of a
// bad setting. It reads nothing: the tokens are read by tokens.
func (m *mcpConfig) parse() (mcp.Config, error) {
	var cfg mcp.Config
	byName := map[string]int{}
	for _, v := range m.Servers {
		s, err := mcp.ParseServer(v)
		if err != nil {
			return cfg, fmt.Errorf("--mcp: %v", err)
		}
		if _, dup := byName[s.Name]; dup {
			return cfg, fmt.Errorf("--mcp: server %q is configured twice", s.Name)
		}
		byName[s.Name] = len(cfg.Servers)
		cfg.Servers = append(cfg.Servers, s)
	}
	known := func(flag, name string) error {
		if _, ok := byName[name]; !ok {
			return fmt.Errorf("%s: no MCP server %q is configured (with --mcp)", flag, name)
		}
		return nil
	}
	for _, v := range m.TokenFiles {
		name, _, err := mcp.ParseTokenFile(v)
		if err != nil {
			return cfg, fmt.Errorf("--mcp-token-file: %v", err)
		}
		if err := known("--mcp-token-file", name); err != nil {
			return cfg, err
		}
	}
	for _, v := range m.Tags {
		r, err := mcp.ParseTags(v)
		if err != nil {
			return cfg, fmt.Errorf("--mcp-tags: %v", err)
		}
		if err := known("--mcp-tags", r.Server); err != nil {
			return cfg, err
		}
		cfg.Tags = append(cfg.Tags, r)
	}
	for _, v := range m.Tools {
		name, tools, err := mcp.ParseToolList(v)
		if err != nil {
			return cfg, fmt.Errorf("--mcp-tools: %v", err)
		}
		if err := known("--mcp-tools", name); err != nil {
			return cfg, err
		}
		if cfg.Grant == nil {
			cfg.Grant = map[string][]string{}
		}
		cfg.Grant[name] = append(cfg.Grant[name], tools...)
	}
	for _, v := range m.Optional {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if err := known("--mcp-optional", name); err != nil {
				return cfg, err
			}
			cfg.Servers[byName[name]].Optional = true
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("--mcp: %v", err)
	}
	if m.ConnectTimeout <= 0 {
		return cfg, fmt.Errorf("--mcp-connect-timeout must be a positive duration (got %s)", m.ConnectTimeout)
	}
	if m.CallWait <= 0 {
		return cfg, fmt.Errorf("--mcp-call-wait must be a positive duration (got %s)", m.CallWait)
	}
	if m.MaxResult < minMCPResult || m.MaxResult > maxMCPResult {
		return cfg, fmt.Errorf("--mcp-max-result %d: want %d to %d bytes", m.MaxResult, minMCPResult, maxMCPResult)
	}
	return cfg, nil
}

// tokens sets each server's bearer token: from AGENT_MCP_TOKEN_<NAME>, or from
// its --mcp-token-file, which beats it. A token file that cannot be read is
// bad config.
func (m *mcpConfig) tokens(cfg *mcp.Config) error {
	byName := map[string]*mcp.ServerConfig{}
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		s.Token = strings.TrimSpace(os.Getenv(mcp.TokenEnv(s.Name)))
		byName[s.Name] = s
	}
	for _, v := range m.TokenFiles {
		name, file, err := mcp.ParseTokenFile(v)
		if err != nil || byName[name] == nil {
			return fmt.Errorf("--mcp-token-file %q: want NAME=FILE of a configured --mcp server", v)
		}
		tok, err := secretfile.Token(file)
		if err != nil {
			return fmt.Errorf("--mcp-token-file %s: %v", name, err)
		}
		byName[name].Token = tok
	}
	return nil
}

// toolServers is the built MCP side of a supervisor: the sessions (nil with
// no servers configured) and the --mcp-tools grant. Its methods are safe for
// concurrent use; a nil *toolServers has no servers.
type toolServers struct {
	set     *mcp.Set
	grant   map[string][]string
	timeout time.Duration // --mcp-connect-timeout
	exec    bool          // --allow-exec: the root grant holds subagent/exec
}

// openMCP creates the MCP sessions, which start connecting in the background.
// With no server configured it returns a toolServers without sessions.
func openMCP(m *mcpConfig, log *slog.Logger) (*toolServers, mcp.Config, error) {
	cfg, err := m.parse()
	if err != nil {
		return nil, cfg, cli.UsageError("%v", err)
	}
	t := &toolServers{grant: cfg.Grant, timeout: m.ConnectTimeout}
	if len(cfg.Servers) == 0 {
		return t, cfg, nil
	}
	if err := m.tokens(&cfg); err != nil {
		return nil, cfg, cli.UsageError("%v", err)
	}
	set, err := mcp.NewSet(cfg, mcp.Options{
		Logger:         log,
		ConnectTimeout: m.ConnectTimeout,
		CallWait:       m.CallWait,
		MaxResult:      m.MaxResult,
		Version:        version,
	})
	if err != nil {
		return nil, cfg, cli.UsageError("--mcp: %v", err)
	}
	set.Start()
	t.set = set
	return t, cfg, nil
}

// waitReady is the one-shot start: every required MCP server must connect
// within --mcp-connect-timeout, else exit 6; a tool named in --mcp-tools that
// its server does not list is bad config.
func (t *toolServers) waitReady(ctx context.Context) error {
	if t == nil || t.set == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if err := t.set.WaitRequired(ctx); err != nil {
		var ue *mcp.UnavailableError
		if errors.As(err, &ue) {
			return &cli.ExitError{Code: api.ExitMCPUnavailable, Err: fmt.Errorf("%v (a server marked --mcp-optional may be down at start)", err)}
		}
		return err
	}
	if _, missing := t.set.Grant(t.grant); len(missing) > 0 {
		return cli.UsageError("--mcp-tools: %s is not a tool its server lists", missing[0])
	}
	return nil
}

// watch is the serve start: the service runs while servers connect; once
// every required one has, it logs so (and any --mcp-tools entry its server
// does not list). It returns when ctx ends.
func (t *toolServers) watch(ctx context.Context, log *slog.Logger) {
	if t == nil || t.set == nil {
		return
	}
	if t.set.WaitRequired(ctx) != nil {
		return
	}
	grant, missing := t.set.Grant(t.grant)
	for _, ref := range missing {
		log.Warn("--mcp-tools names a tool its server does not list", "tool", ref.String())
	}
	log.Info("mcp servers ready", "tools", len(grant))
}

// ready reports whether every required MCP server has connected once.
func (t *toolServers) ready() bool { return t == nil || t.set == nil || t.set.Ready() }

// close closes every MCP session.
func (t *toolServers) close() {
	if t != nil && t.set != nil {
		t.set.Close()
	}
}

// rootScope is the root grant as a payload scope: every tool the MCP servers
// list (as of now), or the --mcp-tools subset of a server, and with
// --allow-exec subagent/exec. The supervisor computes its Rule-of-Two legs.
func (t *toolServers) rootScope() api.ToolScope {
	var scope api.ToolScope
	if t == nil {
		return scope
	}
	if t.set != nil {
		scope.Allow, _ = t.set.Grant(t.grant)
	}
	if t.exec {
		scope.Allow = append(scope.Allow, api.ExecRef)
	}
	return scope
}
