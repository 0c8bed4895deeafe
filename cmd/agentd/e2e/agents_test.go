package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// agentsFile is a declared-agents file of two types: the researcher on an
// intelligence of its own (a script that answers with its system prompt),
// the coder, the default, on the service's (a script whose root spawns a
// researcher child and answers with its own prompt and the child's answer).
func agentsFile(name, researcherScript string, extraSkill string) string {
	skills := `{"id": "research", "name": "Research a question", "description": "Finds and weighs sources.", "tags": ["research"], "examples": ["what changed in TLS 1.3?"], "agent": "researcher"},
	  {"id": "code", "name": "Write code", "description": "Writes a small change.", "tags": ["code"], "agent": "coder"}`
	if extraSkill != "" {
		skills += `, {"id": "` + extraSkill + `", "name": "Review", "description": "Reviews a change.", "tags": ["review"]}`
	}
	return `{
  "card": {"name": "` + name + `", "description": "A research desk.", "documentation_url": "https://docs.example.com/desk", "skills": [` + skills + `]},
  "intelligences": {"research": {"endpoint": "builtin:script=` + researcherScript + `"}},
  "agents": {
    "default": "coder",
    "types": {
      "researcher": {"intelligence": "research", "system_prompt": "You are a careful researcher.", "limits": {"max_steps": 5, "max_depth": 1}},
      "coder": {"system_prompt": "You write small, tested changes.", "budget": {"max_tokens": 50000}}
    }
  }
}`
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDeclaredAgents runs serve with an agents file: the card (as the a2a-go
// resolver reads it) has the file's name and skills; a message naming the
// research skill runs the researcher's system prompt on its intelligence; a
// message naming none runs the default type, whose spawn naming the
// researcher type gets that type's prompt; SIGHUP with a changed file
// changes the card, and with a bad file keeps it, logged at ERROR naming the
// key.
func TestDeclaredAgents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	researcher := writeScript(t, "[default]\nanswer \"researcher on its own model: {system}\"\n")
	coder := writeScript(t, `[depth 0]
spawn sync "look it up" type=researcher
answer "coder: {system} || child: {results}"
[default]
answer "unexpected"
`)
	file := filepath.Join(dir, "agents.json")
	writeFile(t, file, agentsFile("research-desk", researcher, ""))
	s := startService(t, "--intelligence", "builtin:script="+coder, "--agents", file)
	if !strings.Contains(s.logs.String(), `"msg":"agents file loaded"`) {
		t.Errorf("no log of the loaded file and its version:\n%s", s.logs.String())
	}
	ctx := context.Background()
	resolve := func() *a2a.AgentCard {
		t.Helper()
		card, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, s.url)
		if err != nil {
			t.Fatal(err)
		}
		return card
	}
	skillIDs := func(c *a2a.AgentCard) []string {
		var ids []string
		for _, sk := range c.Skills {
			ids = append(ids, sk.ID)
		}
		return ids
	}
	card := resolve()
	if card.Name != "research-desk" || card.DocumentationURL != "https://docs.example.com/desk" || !slices.Equal(skillIDs(card), []string{"research", "code"}) ||
		card.Skills[0].Examples[0] != "what changed in TLS 1.3?" || card.URL == "" {
		t.Fatalf("card: %+v", card)
	}

	c := s.client(t)
	send := func(skill string) string {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "the question"})
		if skill != "" {
			msg.Metadata = map[string]any{api.MetaSkill: skill}
		}
		res, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("send (skill %q): %+v", skill, res)
		}
		return artifactText(task)
	}
	if got := send("research"); !strings.HasPrefix(got, "researcher on its own model: You are a careful researcher.") {
		t.Errorf("the research skill's root: %q", got)
	}
	if out, code := runCombined(t, "send", "--to", s.url, "--progress=false", "--skill", "research", "the question"); code != 0 || !strings.Contains(out, "researcher on its own model: You are a careful researcher.") {
		t.Errorf("agentd send --skill research: exit %d\n%s", code, out)
	}
	got := send("")
	if !strings.HasPrefix(got, "coder: You write small, tested changes.") || !strings.Contains(got, "child: researcher on its own model: You are a careful researcher.") {
		t.Errorf("the default type's root and its researcher child: %q", got)
	}

	writeFile(t, file, agentsFile("research-desk-2", researcher, "review"))
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the reload logged", func() bool {
		return strings.Contains(s.logs.String(), "SIGHUP: agents file loaded")
	})
	if c := resolve(); c.Name != "research-desk-2" || !slices.Equal(skillIDs(c), []string{"research", "code", "review"}) {
		t.Errorf("the card after the reload: %+v", c)
	}

	writeFile(t, file, strings.Replace(agentsFile("research-desk-3", researcher, ""), `"max_depth": 1`, `"max_depth": -1`, 1))
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the bad file refused", func() bool {
		return strings.Contains(s.logs.String(), "the agents file did not load")
	})
	var line struct {
		Level string `json:"level"`
		Err   string `json:"err"`
	}
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, "the agents file did not load") {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line.Level != "ERROR" || !strings.Contains(line.Err, "agents.types.researcher.limits.max_depth: must be >= 0") {
		t.Errorf("the refusal's log line: %+v", line)
	}
	if c := resolve(); c.Name != "research-desk-2" || len(c.Skills) != 3 {
		t.Errorf("a bad file changed the card: %+v", c)
	}
	if got := send("research"); !strings.HasPrefix(got, "researcher on its own model: You are a careful researcher.") {
		t.Errorf("after the bad file, the research skill's root: %q", got)
	}
}

// TestAgentsFileBadAtStart: a file that does not load is bad config (exit
// 2), naming the key: a bad value, an unknown key (the file is strict), a
// reference to an undeclared type, a peer no --peer configures; and a
// missing file.
func TestAgentsFileBadAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := writeScript(t, "[default]\nanswer \"x\"\n")
	good := agentsFile("desk", script, "")
	for name, tc := range map[string]struct{ old, new, key string }{
		"bad value":    {`"max_depth": 1`, `"max_depth": -1`, "agents.types.researcher.limits.max_depth: must be >= 0"},
		"unknown key":  {`"max_depth": 1`, `"max_depht": 1`, "agents.types.researcher.limits.max_depht: unknown key"},
		"unknown type": {`"agent": "coder"`, `"agent": "writer"`, `card.skills[1].agent: "writer" is not one of agents.types`},
		"no such peer": {`"limits": {"max_steps": 5`, `"tools": {"peers": ["peer:nowhere"]}, "limits": {"max_steps": 5`, `agents.types.researcher.tools.peers[0]: "peer:nowhere" is not a configured peer`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		writeFile(t, path, strings.Replace(good, tc.old, tc.new, 1))
		wantUsageError(t, "", tc.key, "serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--agents", path)
	}
	wantUsageError(t, "", "--agents", "serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--agents", filepath.Join(dir, "missing.json"))
}

// TestCompactionInAChild: `agentd run` whose root (a child process of the
// supervisor) runs a script with a small context window and collects six
// long child results, more than the window holds: the conversation is
// compacted (the summary's tokens counted in the run's usage), and the run
// completes where, uncompacted, the model refuses the request.
func TestCompactionInAChild(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a long finding of the child. ", 55)
	src := "window 2500\n[depth 0]\n"
	for _, n := range []string{"1", "2", "3", "4", "5", "6"} {
		src += "spawn sync \"find " + n + "\"\n"
	}
	src += "answer \"done after {messages} messages\"\n[depth 1]\nanswer \"" + long + "\"\n"
	script := writeScript(t, src)
	stdout, stderr, code := runOnceEnv(t, nil, "--state-dir", t.TempDir(), "--intelligence", "builtin:script="+script,
		"--log-level", "info", "--log-format", "json", "--instruction", "collect the findings")
	if code != 0 || !strings.Contains(stdout, "done after") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var compacted struct {
		Policy    string `json:"policy"`
		TokensIn  int64  `json:"tokens_in"`
		TokensOut int64  `json:"tokens_out"`
		Before    int64  `json:"tokens_before"`
		After     int64  `json:"tokens_after"`
	}
	var ended struct {
		AgentPath string `json:"agent_path"`
		Tokens    int64  `json:"tokens"`
	}
	for _, l := range strings.Split(stderr, "\n") {
		switch {
		case strings.Contains(l, `"msg":"conversation compacted"`):
			_ = json.Unmarshal([]byte(l), &compacted)
		case strings.Contains(l, `"msg":"subagent ended"`) && strings.Contains(l, `"agent_path":"0",`):
			_ = json.Unmarshal([]byte(l), &ended)
		}
	}
	if compacted.Policy != api.CompactSummarize || compacted.TokensIn == 0 || compacted.After >= compacted.Before {
		t.Fatalf("no summarizing compaction logged by the child: %+v\n%s", compacted, stderr)
	}
	// The supervisor's count of the root's tokens holds the summary's.
	if ended.AgentPath != "0" || ended.Tokens < compacted.TokensIn+compacted.TokensOut {
		t.Fatalf("the root's tokens as the supervisor counted them: %+v (summary %d)", ended, compacted.TokensIn+compacted.TokensOut)
	}
}
