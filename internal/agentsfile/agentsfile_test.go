package agentsfile

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

func TestParseTwoTypes(t *testing.T) {
	c, err := Load("testdata/two-types.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Version) != 12 {
		t.Errorf("version %q: want 12 hex digits", c.Version)
	}
	r := c.TypeFor("research")
	if r == nil || r.Name != "researcher" || r.SystemPrompt == "" || r.Intelligence == nil || r.Intelligence.ContextWindow != 128000 {
		t.Fatalf("research: %+v", r)
	}
	if r.Limits.MaxSteps != 30 || r.Limits.MaxTokens != 100000 || r.Limits.DistillateBudget != 4000 || r.MaxDepth != 2 || r.Peers == nil || len(r.Peers) != 0 {
		t.Errorf("researcher limits: %+v", r)
	}
	if r.SelfTools != nil {
		t.Errorf("researcher self-tools: %v, want all (nil)", r.SelfTools)
	}
	leaf, err := Parse([]byte(`{"agents":{"types":{"leaf":{"limits":{"max_depth":0}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if l := leaf.Types["leaf"]; slices.Contains(l.SelfTools, api.ToolSpawn) || !slices.Contains(l.SelfTools, api.ToolAwait) {
		t.Errorf("max_depth 0 is a leaf without subagent.spawn: %v", l.SelfTools)
	}
	if code := c.TypeFor("code"); code == nil || code.Name != "coder" || code.Intelligence.Compaction != api.CompactTrim {
		t.Errorf("code: %+v", code)
	}
	if d := c.TypeFor("nonesuch"); d == nil || d.Name != "researcher" {
		t.Errorf("an undeclared skill runs as the default type, got %+v", d)
	}
}

// TestParseNamesTheKey: every bad file is refused with the key it is about.
func TestParseNamesTheKey(t *testing.T) {
	good, err := os.ReadFile("testdata/two-types.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"negative depth", `"max_depth": 2`, `"max_depth": -1`, "agents.types.researcher.limits.max_depth: must be >= 0"},
		{"unknown key", `"max_depth": 2`, `"max_depht": 2`, "agents.types.researcher.limits.max_depht: unknown key"},
		{"unknown top key", `"card": {`, `"cards": {}, "card": {`, "cards: unknown key"},
		{"unknown intelligence key", `"compaction": "trim"`, `"compaction": "trim", "temperature": 1`, "agents.types.coder.intelligence.temperature: unknown key"},
		{"bad compaction", `"compaction": "trim"`, `"compaction": "drop"`, "agents.types.coder.intelligence: intelligence.compaction"},
		{"unknown intelligence ref", `"intelligence": "main"`, `"intelligence": "other"`, "agents.types.researcher.intelligence: \"other\" is not one of intelligences"},
		{"bad default", `"default": "researcher"`, `"default": "writer"`, "agents.default"},
		{"skill to no type", `"agent": "coder"`, `"agent": "writer"`, "card.skills[1].agent"},
		{"skill without id", `"id": "code"`, `"id": ""`, "card.skills[1].id: must be set"},
		{"duplicate skill", `"id": "code"`, `"id": "research"`, "card.skills[1].id"},
		{"bad doc url", `https://docs.example.com/research-desk`, `docs.example.com`, "card.documentation_url"},
		{"type error", `"max_steps": 40`, `"max_steps": "forty"`, "max_steps"},
		{"bad pattern", `"search/*"`, `"search"`, "agents.types.researcher.tools.mcp[0]"},
		{"bad self-tool", `"exec": false,`, `"exec": false, "self": ["subagent.spawn", "subagent.exec"],`, "agents.types.researcher.tools.self[1]"},
		{"bad peer", `"peers": []`, `"peers": ["b"]`, "agents.types.researcher.tools.peers[0]"},
		{"small budget", `"distillate_budget": 4000`, `"distillate_budget": 10`, "agents.types.researcher.budget.distillate_budget"},
		{"bad builtin", `"endpoint": "builtin:demo", "compaction"`, `"endpoint": "builtin:nope", "compaction"`, "agents.types.coder.intelligence"},
		{"not JSON", `{`, `[`, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(string(good), tc.old, tc.new, 1)
			if src == string(good) {
				t.Fatalf("%q not in the file", tc.old)
			}
			_, err := Parse([]byte(src))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

// FuzzParse: no input panics; an error is always ErrInvalid; a file that
// loads resolves every skill to a declared type when it has types.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/two-types.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"agents":{"types":{"a":{"intelligence":null}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		for _, s := range c.Card.Skills {
			if len(c.Types) > 0 && c.TypeFor(s.ID) == nil {
				t.Fatalf("skill %q resolves to no type", s.ID)
			}
		}
	})
}

// TestDocsExampleParses: the file docs/intelligence.md shows loads. Its
// intelligence has a fallback endpoint, which api.Intelligence carries once
// the failover work (Intelligence.Fallbacks, KeyEnv) is merged; until then
// the test says so and skips.
func TestDocsExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/intelligence.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Declared agents")
	if !ok {
		t.Fatal("no Declared agents section")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no JSON example in the Declared agents section")
	}
	c, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Types) != 2 || c.TypeFor("research").Name != "researcher" || c.TypeFor("").Name != "coder" {
		t.Fatalf("example: %+v", c)
	}
}

// TestKeySources: an endpoint's key_env or key_file (the supervisor's) is
// resolved to the variable its key reaches children in, the same for the
// same source; neither the supervisor's variable nor the file's path nor a
// key is in what a payload carries. ReadKeys reads each source once, and a
// source that gives no key is an error naming its key.
func TestKeySources(t *testing.T) {
	dir := t.TempDir()
	keyFile, emptyFile := dir+"/key", dir+"/empty"
	for path, content := range map[string]string{keyFile: "sk-from-file\n", emptyFile: " \n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := `{
  "intelligences": {
    "a": {"endpoint": "http://a.invalid/v1", "model": "ma", "key_env": "E2E_A_KEY",
          "fallbacks": [{"endpoint": "http://b.invalid/v1", "model": "mb", "key_file": "` + keyFile + `"},
                        {"endpoint": "http://c.invalid/v1", "model": "mc"}]},
    "shared": {"endpoint": "http://d.invalid/v1", "model": "md", "key_env": "E2E_A_KEY"},
    "plain": {"endpoint": "http://e.invalid/v1", "model": "me"}
  },
  "agents": {"types": {
    "x": {"intelligence": "a"},
    "y": {"intelligence": {"endpoint": "http://f.invalid/v1", "model": "mf", "key_file": "` + keyFile + `"}},
    "z": {"intelligence": "plain"}
  }}
}`
	c, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	envVar, fileVar := KeyVar(api.KeySource{Env: "E2E_A_KEY"}), KeyVar(api.KeySource{File: keyFile})
	if envVar == fileVar || !strings.HasPrefix(envVar, api.EnvIntelligenceKey+"_DECL_") || len(envVar) != len(api.EnvIntelligenceKey+"_DECL_")+12 {
		t.Fatalf("variables %s %s", envVar, fileVar)
	}
	x, y, z := c.Types["x"].Intelligence, c.Types["y"].Intelligence, c.Types["z"].Intelligence
	if x.KeyEnv != envVar || x.Fallbacks[0].KeyEnv != fileVar || x.Fallbacks[1].KeyEnv != "" || y.KeyEnv != fileVar || z.KeyEnv != "" {
		t.Errorf("resolved key variables: x %q %q %q, y %q, z %q", x.KeyEnv, x.Fallbacks[0].KeyEnv, x.Fallbacks[1].KeyEnv, y.KeyEnv, z.KeyEnv)
	}
	b, _ := json.Marshal(c.Types)
	if strings.Contains(string(b), "E2E_A_KEY") || strings.Contains(string(b), keyFile) || strings.Contains(string(b), "key_file") {
		t.Errorf("a resolved type names the supervisor's source: %s", b)
	}
	getenv := func(v string) string { return map[string]string{"E2E_A_KEY": "sk-from-env"}[v] }
	env, err := c.ReadKeys(getenv)
	if want := []string{envVar + "=sk-from-env", fileVar + "=sk-from-file"}; err != nil || !slices.Equal(env, sortedCopy(want)) {
		t.Fatalf("ReadKeys = %v, %v; want %v", env, err, want)
	}
	if _, err := c.ReadKeys(func(string) string { return "" }); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "intelligences.a.key_env: E2E_A_KEY is not set") {
		t.Errorf("an unset variable: %v", err)
	}

	for name, tc := range map[string]struct{ old, new, want string }{
		"missing file": {`"key_file": "` + keyFile + `"},`, `"key_file": "` + dir + `/nonesuch"},`, "intelligences.a.fallbacks[0].key_file: open " + dir + "/nonesuch"},
		"empty file":   {`"key_file": "` + keyFile + `"},`, `"key_file": "` + emptyFile + `"},`, "intelligences.a.fallbacks[0].key_file: " + emptyFile + " is empty"},
		"inline":       {`"mf", "key_file": "` + keyFile, `"mf", "key_file": "` + emptyFile, "agents.types.y.intelligence.key_file"},
	} {
		c, err := Parse([]byte(strings.Replace(src, tc.old, tc.new, 1)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := c.ReadKeys(getenv); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sk-from") {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadKeys(getenv); err == nil || !strings.Contains(err.Error(), "intelligences.a.fallbacks[0].key_file") || strings.Contains(err.Error(), "sk-from") {
		t.Errorf("a key file others may read: %v", err)
	}

	for name, tc := range map[string]struct{ old, new, want string }{
		"both":     {`"mb", "key_file"`, `"mb", "key_env": "X", "key_file"`, "intelligences.a.fallbacks[0]: give key_env or key_file, not both"},
		"bad name": {`"key_env": "E2E_A_KEY",`, `"key_env": "A-KEY",`, "intelligences.a: intelligence.key_env"},
		"unknown":  {`"mb", "key_file"`, `"mb", "key": "sk", "key_file"`, "intelligences.a.fallbacks[0].key: unknown key"},
	} {
		if _, err := Parse([]byte(strings.Replace(src, tc.old, tc.new, 1))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
