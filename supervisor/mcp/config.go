package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/loopback"
	"github.com/agentd/agentd/supervisor"
)

// ServerConfig is one configured MCP server. The zero value is not valid.
type ServerConfig struct {
	// Name is how subagents address the server: its tools are SERVER/TOOL.
	Name string
	// URL is the streamable HTTP endpoint: https, or http on loopback only.
	URL string
	// Token, if set, is sent as "Authorization: Bearer TOKEN" on every request.
	// It comes from the environment or a file, never argv, and is never logged.
	Token string
	// Optional marks a server that is not required: a one-shot run starts
	// without it (and without its tools) when it is down at start.
	Optional bool
}

// TagRule gives the Rule-of-Two legs of every tool of a server (Tool empty) or
// of one tool; a tool's own rule beats its server's.
type TagRule struct {
	Server string
	Tool   string
	Tags   api.ToolTags
}

// Config is the MCP part of agentd's configuration. The zero value holds no
// server and is valid.
type Config struct {
	Servers []ServerConfig
	Tags    []TagRule
	// Grant narrows the root grant: for a server named here, only these of its
	// tools; a server not named contributes every tool it lists.
	Grant map[string][]string
}

// The self-tools' server name: no MCP server may take it.
const selfServer = "subagent"

// CheckName checks a server name: 1 to 64 of [A-Za-z0-9_-], starting with a
// letter or digit, and not the self-tools' "subagent".
func CheckName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("server name %q: want 1 to 64 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '-'))
		if !ok {
			return fmt.Errorf("server name %q: want letters, digits, '_' and '-' (starting with a letter or digit)", name)
		}
	}
	if name == selfServer {
		return fmt.Errorf("server name %q is reserved for the self-tools", name)
	}
	return nil
}

// checkTool checks a tool name as a configuration names it: 1 to 128 of
// [A-Za-z0-9_.-/].
func checkTool(tool string) error {
	if tool == "" || len(tool) > 128 {
		return fmt.Errorf("tool name %q: want 1 to 128 characters", tool)
	}
	for i := 0; i < len(tool); i++ {
		c := tool[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return fmt.Errorf("tool name %q: want letters, digits, '_', '-', '.' and '/'", tool)
		}
	}
	return nil
}

// CheckURL checks an MCP endpoint: an absolute https URL, or http whose host is
// loopback (a loopback address or localhost, as package loopback decides). Credentials in the URL
// are refused (they would sit on argv); use a token file instead.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %v", raw, err)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("url %q: want an absolute http(s) URL with a host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("url %q: credentials in the URL are refused; give a token file or the token environment variable", redact(u))
	}
	if u.Fragment != "" {
		return fmt.Errorf("url %q: a fragment has no meaning for an endpoint", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopback.Host(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("url %q: plain http is only allowed on loopback (127.0.0.1, ::1, localhost); use https", raw)
	default:
		return fmt.Errorf("url %q: want https (or http on loopback), got scheme %q", raw, u.Scheme)
	}
}

func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// cutPair splits NAME=VALUE; NAME must be non-empty.
func cutPair(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%q: want NAME=VALUE", s)
	}
	return k, v, nil
}

// ParseServer parses NAME=URL and checks both.
func ParseServer(s string) (ServerConfig, error) {
	name, raw, err := cutPair(s)
	if err != nil {
		return ServerConfig{}, fmt.Errorf("%q: want NAME=URL", s)
	}
	if err := CheckName(name); err != nil {
		return ServerConfig{}, err
	}
	if err := CheckURL(raw); err != nil {
		return ServerConfig{}, fmt.Errorf("%s: %w", name, err)
	}
	return ServerConfig{Name: name, URL: raw}, nil
}

// ParseTags parses NAME=LEGS or NAME/TOOL=LEGS, where LEGS is a comma list of
// untrusted_input, sensitive and egress, or "none" (or nothing) for a tool
// that holds no leg.
func ParseTags(s string) (TagRule, error) {
	target, legs, err := cutPair(s)
	if err != nil {
		return TagRule{}, fmt.Errorf("%q: want NAME=LEGS or NAME/TOOL=LEGS", s)
	}
	var r TagRule
	server, tool, hasTool := strings.Cut(target, "/")
	if err := CheckName(server); err != nil {
		return TagRule{}, err
	}
	if hasTool {
		if err := checkTool(tool); err != nil {
			return TagRule{}, err
		}
	}
	r.Server, r.Tool = server, tool
	legs = strings.TrimSpace(legs)
	if legs == "" || legs == "none" {
		return r, nil
	}
	for _, leg := range strings.Split(legs, ",") {
		switch strings.TrimSpace(leg) {
		case "untrusted_input":
			r.Tags.UntrustedInput = true
		case "sensitive":
			r.Tags.Sensitive = true
		case "egress":
			r.Tags.Egress = true
		default:
			return TagRule{}, fmt.Errorf("%s: unknown leg %q: want untrusted_input, sensitive, egress or none", target, leg)
		}
	}
	return r, nil
}

// ParseToolList parses NAME=TOOL,TOOL: the tools of server NAME the root grant
// holds.
func ParseToolList(s string) (string, []string, error) {
	name, list, err := cutPair(s)
	if err != nil {
		return "", nil, fmt.Errorf("%q: want NAME=TOOL,TOOL", s)
	}
	if err := CheckName(name); err != nil {
		return "", nil, err
	}
	var tools []string
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if err := checkTool(t); err != nil {
			return "", nil, fmt.Errorf("%s: %w", name, err)
		}
		tools = append(tools, t)
	}
	return name, tools, nil
}

// ParseTokenFile parses NAME=FILE; reading the file is the caller's.
func ParseTokenFile(s string) (string, string, error) {
	name, file, err := cutPair(s)
	if err != nil || file == "" {
		return "", "", fmt.Errorf("%q: want NAME=FILE", s)
	}
	if err := CheckName(name); err != nil {
		return "", "", err
	}
	return name, file, nil
}

// TokenEnv is the environment variable that may hold server name's bearer
// token: AGENT_MCP_TOKEN_ and the name in upper case with '-' as '_'.
func TokenEnv(name string) string {
	return "AGENT_MCP_TOKEN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Validate checks the configuration as a whole: server names unique, and
// every tag rule and grant naming a configured server.
func (c *Config) Validate() error {
	names := make(map[string]bool, len(c.Servers))
	for _, s := range c.Servers {
		if err := CheckName(s.Name); err != nil {
			return err
		}
		if err := CheckURL(s.URL); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		if names[s.Name] {
			return fmt.Errorf("server %q configured twice", s.Name)
		}
		names[s.Name] = true
	}
	for _, r := range c.Tags {
		if !names[r.Server] {
			return fmt.Errorf("tags for %q: no such MCP server is configured", r.Server)
		}
	}
	for s, tools := range c.Grant {
		if !names[s] {
			return fmt.Errorf("tools for %q: no such MCP server is configured", s)
		}
		if len(tools) == 0 {
			return fmt.Errorf("tools for %q: an empty list (leave the server out instead)", s)
		}
	}
	return nil
}

// Tagger returns the Rule-of-Two tagger of the rules: a tool's own rule, else
// its server's, else untagged (which the supervisor counts as untrusted_input).
// The later of two rules for the same target wins.
func (c *Config) Tagger() supervisor.ToolTagger {
	servers := make(map[string]api.ToolTags)
	tools := make(map[api.ToolRef]api.ToolTags)
	for _, r := range c.Tags {
		if r.Tool == "" {
			servers[r.Server] = r.Tags
		} else {
			tools[api.ToolRef{Server: r.Server, Tool: r.Tool}] = r.Tags
		}
	}
	return func(ref api.ToolRef) (api.ToolTags, bool) {
		if t, ok := tools[ref]; ok {
			return t, true
		}
		t, ok := servers[ref.Server]
		return t, ok
	}
}

// anyTool stands, in GateRefs, for the tools of a server that no tag rule
// names: no real tool is called this (checkTool refuses it).
const anyTool = "*"

// GateRefs returns the tools the startup Rule-of-Two gate evaluates, before
// any server is reached: for a server with a configured grant, exactly those
// tools; for any other, a stand-in for all its tools (carrying the server's
// tags) plus every tool a rule tags on its own. The real root grant is always
// a subset, so its legs never exceed what the gate saw.
func (c *Config) GateRefs() []api.ToolRef {
	var out []api.ToolRef
	for _, s := range c.Servers {
		if tools, ok := c.Grant[s.Name]; ok {
			for _, t := range tools {
				out = append(out, api.ToolRef{Server: s.Name, Tool: t})
			}
			continue
		}
		out = append(out, api.ToolRef{Server: s.Name, Tool: anyTool})
		for _, r := range c.Tags {
			if r.Server == s.Name && r.Tool != "" {
				out = append(out, api.ToolRef{Server: s.Name, Tool: r.Tool})
			}
		}
	}
	return out
}

// UnavailableError reports the required servers that could not be reached.
type UnavailableError struct {
	// Down maps each unreachable server's name to its last error.
	Down map[string]error
}

func (e *UnavailableError) Error() string {
	names := make([]string, 0, len(e.Down))
	for n := range e.Down {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s: %v", n, e.Down[n]))
	}
	return "mcp: required server unavailable: " + strings.Join(parts, "; ")
}

// errNotConnected is the last error of a server that has not tried yet.
var errNotConnected = errors.New("not connected yet")
