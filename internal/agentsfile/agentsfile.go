// Package agentsfile reads the declared-agents file of `agentd serve
// --agents FILE` (docs/intelligence.md, "Declared agents"): the deployment's
// agent card (name, description, documentation URL, skills) and its named
// agent types, each an intelligence, a system prompt, tools, limits and a
// budget. The file is JSON, decoded strictly: an unknown key is an error, and
// every error names the key it is about (agents.types.researcher.limits.max_depth).
//
// An endpoint's API key is never in the file: key_env names a variable of the
// supervisor's that holds it, key_file a file of the supervisor's. Resolved,
// an endpoint's KeyEnv names instead the variable its key reaches children in
// (KeyVar), and Config.Keys lists where each is read (Config.ReadKeys).
package agentsfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/secretfile"
)

// MaxSize bounds an agents file.
const MaxSize = 1 << 20

// ErrInvalid wraps every error of a file that does not load.
var ErrInvalid = errors.New("agentsfile: invalid agents file")

// File is the agents file as written.
type File struct {
	Card          Card                    `json:"card"`
	Intelligences map[string]Intelligence `json:"intelligences"`
	Agents        Agents                  `json:"agents"`
}

// Intelligence is an intelligence as the file writes it: the fields of
// api.Intelligence, where key_env names the supervisor's variable that holds
// its endpoint's API key, plus key_file, a file of the supervisor's that
// holds it instead; each fallback likewise. An endpoint with neither sends
// the service's key (AGENT_INTELLIGENCE_KEY, --intelligence-key-file), a
// fallback with neither none.
type Intelligence struct {
	api.Intelligence
	KeyFile   string     `json:"key_file"`
	Fallbacks []Endpoint `json:"fallbacks"`
}

// Endpoint is one fallback of an Intelligence as written, with its key
// source.
type Endpoint struct {
	api.Intelligence
	KeyFile string `json:"key_file"`
}

// Card is what the agent card says: every field optional, an empty one keeps
// the card's default.
type Card struct {
	Name             string  `json:"name"`
	Description      string  `json:"description"`
	DocumentationURL string  `json:"documentation_url"`
	Skills           []Skill `json:"skills"`
}

// Skill is one skill of the card, and the agent type a message naming it
// (metadata agentd/skill) runs as its root.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples"`
	// Agent names the agent type; empty is agents.default.
	Agent string `json:"agent"`
}

// Agents are the named agent types and the one a message naming no declared
// skill runs as.
type Agents struct {
	Default string          `json:"default"`
	Types   map[string]Type `json:"types"`
}

// Type is one agent type as written.
type Type struct {
	Description  string      `json:"description"`
	Intelligence IntelRef    `json:"intelligence"`
	SystemPrompt string      `json:"system_prompt"`
	Tools        *Tools      `json:"tools"`
	Limits       *TypeLimits `json:"limits"`
	Budget       *TypeBudget `json:"budget"`
}

// IntelRef is an agent type's intelligence: the name of one of the file's
// intelligences, or one written in place. The zero value keeps the service's
// (--intelligence).
type IntelRef struct {
	Name   string
	Inline *Intelligence
}

// UnmarshalJSON reads a name (a string) or an intelligence (an object).
func (r *IntelRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &r.Name)
	}
	if len(b) > 0 && b[0] == '{' {
		r.Inline = &Intelligence{}
		return json.Unmarshal(b, r.Inline)
	}
	return errors.New("want the name of an intelligence or an intelligence object")
}

// Tools narrow what an agent type may call; an absent field keeps what the
// grant holds.
type Tools struct {
	// MCP are SERVER/TOOL or SERVER/* patterns: the only MCP tools kept.
	MCP []string `json:"mcp"`
	// Exec false drops the exec self-tool; true keeps it when granted.
	Exec *bool `json:"exec"`
	// Peers are the only providers (peer:NAME) its spawns may name; [] is
	// local children only.
	Peers []string `json:"peers"`
	// Self are the only self-tools it is offered (subagent.spawn, ...,
	// resource.wait); [] is none.
	Self []string `json:"self"`
}

// TypeLimits bound an agent type's subagents; each only lowers the
// service's grant.
type TypeLimits struct {
	MaxSteps    *int          `json:"max_steps"`
	Deadline    *api.Duration `json:"deadline"`
	MaxChildren *int          `json:"max_children"`
	MaxDepth    *int          `json:"max_depth"`
	MaxRepeats  *int          `json:"max_repeats"`
}

// TypeBudget is an agent type's token grant and distillate budget.
type TypeBudget struct {
	MaxTokens        *int64 `json:"max_tokens"`
	DistillateBudget *int   `json:"distillate_budget"`
}

// Config is a loaded, valid agents file.
type Config struct {
	// Version identifies the file's content: the first 12 hex digits of its
	// SHA-256, logged when it loads.
	Version string
	Card    Card
	// Types are the resolved agent types by name.
	Types   map[string]*api.AgentType
	Default string
	// Keys are the key sources of the endpoints, in the file's order
	// (intelligences by name, then types' own by type name).
	Keys []KeyRef
}

// KeyRef is where the supervisor reads one declared endpoint's API key, and
// the variable it hands the key to children in, which the endpoint's KeyEnv
// names once resolved.
type KeyRef struct {
	// At is the endpoint's key in the file (intelligences.main,
	// agents.types.coder.intelligence.fallbacks[0]).
	At     string
	Source api.KeySource
	Var    string // KeyVar(Source)
}

// Name is the dotted key of the source: At.key_env or At.key_file.
func (k KeyRef) Name() string {
	if k.Source.Env != "" {
		return k.At + ".key_env"
	}
	return k.At + ".key_file"
}

// KeyVar is the variable a child is handed the key of src in:
// AGENT_INTELLIGENCE_KEY_DECL_ and 12 hex digits of the SHA-256 of the
// source (never of the key), so the same source keeps its variable across
// reloads and endpoints that share a source share it, and it is never the
// supervisor's own variable or a --intelligence-fallback's
// (AGENT_INTELLIGENCE_KEY_N).
func KeyVar(src api.KeySource) string {
	sum := sha256.Sum256([]byte("env\x00" + src.Env + "\x00file\x00" + src.File))
	return api.EnvIntelligenceKey + "_DECL_" + strings.ToUpper(hex.EncodeToString(sum[:6]))
}

// ReadKeys reads every endpoint's key from its source, getenv looking up the
// supervisor's variables, and returns the environment entries (VAR=key) that
// hand them to children, one per variable, sorted. An unset or empty
// variable, an unreadable file, one its group or others may open
// (secretfile), or an empty one is an error naming its key
// (intelligences.main.key_env); it wraps ErrInvalid.
func (c *Config) ReadKeys(getenv func(string) string) ([]string, error) {
	seen := map[string]bool{}
	var env []string
	for _, k := range c.Keys {
		if seen[k.Var] {
			continue
		}
		seen[k.Var] = true
		var key string
		if k.Source.Env != "" {
			if key = getenv(k.Source.Env); key == "" {
				return nil, fmt.Errorf("%w: %s: %s is not set", ErrInvalid, k.Name(), k.Source.Env)
			}
		} else {
			b, err := secretfile.Read(k.Source.File)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, k.Name(), err)
			}
			if key = strings.TrimSpace(string(b)); key == "" {
				return nil, fmt.Errorf("%w: %s: %s is empty", ErrInvalid, k.Name(), k.Source.File)
			}
		}
		env = append(env, k.Var+"="+key)
	}
	sort.Strings(env)
	return env, nil
}

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Parse(b)
}

// Parse decodes and validates an agents file. The error names the first bad
// key, as a dotted path.
func Parse(b []byte) (*Config, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, MaxSize)
	}
	var top any
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
	}
	if err := checkKeys(top, reflect.TypeFor[File](), ""); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%w: %s: want %s", ErrInvalid, te.Field, te.Type)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c, err := f.resolve()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	sum := sha256.Sum256(b)
	c.Version = hex.EncodeToString(sum[:6])
	return c, nil
}

var (
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
	intelRef    = reflect.TypeFor[IntelRef]()
)

// checkKeys refuses a key of v that t does not have, naming its path. It
// follows structs (by their json names), maps, slices and pointers; a type
// that decodes itself is a leaf, but for IntelRef, whose object form is an
// api.Intelligence.
func checkKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == intelRef {
		if _, ok := v.(map[string]any); ok {
			return checkKeys(v, reflect.TypeFor[Intelligence](), path)
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type error, which decoding names
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: unknown key", join(path, k))
			}
			if err := checkKeys(obj[k], ft, join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range sortedKeys(obj) {
			if err := checkKeys(obj[k], t.Elem(), join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range arr {
			if err := checkKeys(e, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonFields are the JSON names of struct type t's fields and their types:
// an embedded struct without a name contributes its own, which t's own
// fields of the same name override (as encoding/json decodes them).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	var own []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
			for k, ft := range jsonFields(f.Type) {
				fields[k] = ft
			}
		default:
			own = append(own, f)
		}
	}
	for _, f := range own {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// validName reports whether name is a type's or an intelligence's name: 1 to
// 64 lowercase letters, digits, - and _, the first a letter or a digit. It is
// a loop, not a regexp: the compiled `{0,63}` repetition was 52 KB of heap
// built at init in every process, every subagent included.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// Bounds of an agent type's numbers (as for the flags they narrow).
const (
	minMaxRepeats       = 2
	minDistillateBudget = 200
)

// resolve validates the file and resolves every type's intelligence.
func (f *File) resolve() (*Config, error) {
	c := &Config{Card: f.Card, Types: map[string]*api.AgentType{}, Default: f.Agents.Default}
	if err := f.checkCard(); err != nil {
		return nil, err
	}
	named := map[string]api.Intelligence{}
	for _, name := range slices.Sorted(mapKeys(f.Intelligences)) {
		key := "intelligences." + name
		if !validName(name) {
			return nil, fmt.Errorf("%s: a name is lowercase letters, digits, - and _", key)
		}
		i, keys, err := resolveIntelligence(key, f.Intelligences[name])
		if err != nil {
			return nil, err
		}
		named[name] = i
		c.Keys = append(c.Keys, keys...)
	}
	for _, name := range slices.Sorted(mapKeys(f.Agents.Types)) {
		t, keys, err := resolveType(name, f.Agents.Types[name], named)
		if err != nil {
			return nil, err
		}
		c.Types[name] = t
		c.Keys = append(c.Keys, keys...)
	}
	if f.Agents.Default != "" {
		if _, ok := c.Types[f.Agents.Default]; !ok {
			return nil, fmt.Errorf("agents.default: %q is not one of agents.types", f.Agents.Default)
		}
	}
	for i, s := range f.Card.Skills {
		switch {
		case s.Agent != "":
			if _, ok := c.Types[s.Agent]; !ok {
				return nil, fmt.Errorf("card.skills[%d].agent: %q is not one of agents.types", i, s.Agent)
			}
		case f.Agents.Default == "" && len(c.Types) > 0:
			return nil, fmt.Errorf("card.skills[%d].agent: name an agent type (there is no agents.default)", i)
		}
	}
	return c, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (f *File) checkCard() error {
	if u := f.Card.DocumentationURL; u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return errors.New("card.documentation_url: want an absolute http(s) URL")
		}
	}
	seen := map[string]bool{}
	for i, s := range f.Card.Skills {
		key := "card.skills[" + strconv.Itoa(i) + "]"
		switch {
		case strings.TrimSpace(s.ID) == "":
			return fmt.Errorf("%s.id: must be set", key)
		case seen[s.ID]:
			return fmt.Errorf("%s.id: %q is declared twice", key, s.ID)
		case strings.TrimSpace(s.Name) == "":
			return fmt.Errorf("%s.name: must be set", key)
		case strings.TrimSpace(s.Description) == "":
			return fmt.Errorf("%s.description: must be set", key)
		}
		seen[s.ID] = true
		for j, tag := range s.Tags {
			if strings.TrimSpace(tag) == "" {
				return fmt.Errorf("%s.tags[%d]: must not be empty", key, j)
			}
		}
	}
	return nil
}

// resolveIntelligence checks the intelligence written at key as
// --intelligence is checked (a builtin:script file is read) and returns it as
// a payload carries it: each endpoint with a key source names the variable
// its key reaches children in (KeyVar) as its KeyEnv, one without none; and
// the key sources.
func resolveIntelligence(key string, in Intelligence) (api.Intelligence, []KeyRef, error) {
	out := in.Intelligence
	out.Fallbacks = nil
	sources := []KeyRef{{At: key, Source: api.KeySource{Env: in.KeyEnv, File: in.KeyFile}}}
	for n, e := range in.Fallbacks {
		out.Fallbacks = append(out.Fallbacks, e.Intelligence)
		sources = append(sources, KeyRef{At: key + ".fallbacks[" + strconv.Itoa(n) + "]", Source: api.KeySource{Env: e.KeyEnv, File: e.KeyFile}})
	}
	if err := out.Validate(); err != nil {
		return api.Intelligence{}, nil, fmt.Errorf("%s: %v", key, err)
	}
	if err := intelligence.Check(out); err != nil {
		return api.Intelligence{}, nil, fmt.Errorf("%s: %v", key, err)
	}
	var keys []KeyRef
	for n, k := range sources {
		if err := k.Source.Validate(); err != nil {
			return api.Intelligence{}, nil, fmt.Errorf("%s: %v", k.At, err)
		}
		v := ""
		if k.Source != (api.KeySource{}) {
			k.Var = KeyVar(k.Source)
			v = k.Var
			keys = append(keys, k)
		}
		if n == 0 {
			out.KeyEnv = v
		} else {
			out.Fallbacks[n-1].KeyEnv = v
		}
	}
	return out, keys, nil
}

func resolveType(name string, t Type, named map[string]api.Intelligence) (*api.AgentType, []KeyRef, error) {
	key := "agents.types." + name
	if !validName(name) {
		return nil, nil, fmt.Errorf("%s: a name is lowercase letters, digits, - and _", key)
	}
	out := &api.AgentType{Name: name, SystemPrompt: t.SystemPrompt}
	var keys []KeyRef
	switch ref := t.Intelligence; {
	case ref.Inline != nil:
		i, k, err := resolveIntelligence(key+".intelligence", *ref.Inline)
		if err != nil {
			return nil, nil, err
		}
		out.Intelligence, keys = &i, k
	case ref.Name != "":
		i, ok := named[ref.Name]
		if !ok {
			return nil, nil, fmt.Errorf("%s.intelligence: %q is not one of intelligences", key, ref.Name)
		}
		out.Intelligence = &i
	}
	if tools := t.Tools; tools != nil {
		for i, pat := range tools.MCP {
			server, tool, ok := strings.Cut(pat, "/")
			if !ok || server == "" || tool == "" || strings.Contains(tool, "/") {
				return nil, nil, fmt.Errorf("%s.tools.mcp[%d]: %q: want SERVER/TOOL or SERVER/*", key, i, pat)
			}
		}
		for i, p := range tools.Peers {
			if n, ok := strings.CutPrefix(p, "peer:"); !ok || n == "" {
				return nil, nil, fmt.Errorf("%s.tools.peers[%d]: %q: want peer:NAME", key, i, p)
			}
		}
		for i, name := range tools.Self {
			if !isSelfTool(name) {
				return nil, nil, fmt.Errorf("%s.tools.self[%d]: %q is not a self-tool (%s)", key, i, name, strings.Join(selfTools(), ", "))
			}
		}
		if tools.Self != nil {
			out.SelfTools = slices.Clone(tools.Self)
		}
		if tools.MCP != nil {
			out.MCP = slices.Clone(tools.MCP)
		}
		if tools.Peers != nil {
			out.Peers = slices.Clone(tools.Peers)
		}
		out.Exec = tools.Exec
	}
	if err := typeLimits(key, t, out); err != nil {
		return nil, nil, err
	}
	if l := t.Limits; l != nil && l.MaxDepth != nil && *l.MaxDepth == 0 {
		// A leaf: it nests nothing, wherever it runs.
		self := out.SelfTools
		if self == nil {
			self = selfTools()
		}
		out.SelfTools = slices.DeleteFunc(slices.Clone(self), func(s string) bool { return s == api.ToolSpawn })
	}
	return out, keys, nil
}

func typeLimits(key string, t Type, out *api.AgentType) error {
	if l := t.Limits; l != nil {
		key := key + ".limits"
		switch {
		case l.MaxSteps != nil && *l.MaxSteps <= 0:
			return fmt.Errorf("%s.max_steps: must be > 0", key)
		case l.Deadline != nil && (*l.Deadline <= 0 || l.Deadline.D() > api.MaxDeadline):
			return fmt.Errorf("%s.deadline: must be a positive duration of at most %s", key, api.MaxDeadline)
		case l.MaxChildren != nil && *l.MaxChildren < 0:
			return fmt.Errorf("%s.max_children: must be >= 0", key)
		case l.MaxDepth != nil && *l.MaxDepth < 0:
			return fmt.Errorf("%s.max_depth: must be >= 0", key)
		case l.MaxRepeats != nil && *l.MaxRepeats < minMaxRepeats:
			return fmt.Errorf("%s.max_repeats: must be >= %d", key, minMaxRepeats)
		}
		set := func(dst *int, v *int) {
			if v != nil {
				*dst = *v
			}
		}
		set(&out.Limits.MaxSteps, l.MaxSteps)
		set(&out.Limits.MaxChildren, l.MaxChildren)
		set(&out.MaxDepth, l.MaxDepth)
		set(&out.Limits.MaxRepeats, l.MaxRepeats)
		if l.Deadline != nil {
			out.Limits.Deadline = *l.Deadline
		}
	}
	if b := t.Budget; b != nil {
		key := key + ".budget"
		switch {
		case b.MaxTokens != nil && *b.MaxTokens <= 0:
			return fmt.Errorf("%s.max_tokens: must be > 0", key)
		case b.DistillateBudget != nil && *b.DistillateBudget < minDistillateBudget:
			return fmt.Errorf("%s.distillate_budget: must be >= %d", key, minDistillateBudget)
		}
		if b.MaxTokens != nil {
			out.Limits.MaxTokens = *b.MaxTokens
		}
		if b.DistillateBudget != nil {
			out.Limits.DistillateBudget = *b.DistillateBudget
		}
	}
	return nil
}

// TypeFor returns the agent type a root message naming skill runs as: the
// declared skill's type, else agents.default; nil when neither (the flags'
// behaviour).
func (c *Config) TypeFor(skill string) *api.AgentType {
	if c == nil {
		return nil
	}
	for _, s := range c.Card.Skills {
		if s.ID == skill && skill != "" {
			name := s.Agent
			if name == "" {
				name = c.Default
			}
			return c.Types[name]
		}
	}
	return c.Types[c.Default]
}

// Type returns the agent type named name.
func (c *Config) Type(name string) (*api.AgentType, bool) {
	if c == nil {
		return nil, false
	}
	t, ok := c.Types[name]
	return t, ok
}

// selfTools are the names of the self-tools a type may list (the exec
// self-tool is tools.exec).
func selfTools() []string {
	var names []string
	for _, t := range api.SelfToolSpecs() {
		names = append(names, t.Name)
	}
	return names
}

func isSelfTool(name string) bool { return slices.Contains(selfTools(), name) }
