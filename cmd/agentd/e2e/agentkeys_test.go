package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// keyServer is a Chat Completions endpoint in this test process that records
// the Authorization header of every request and answers with its name, or
// with 503 when down. onRequest, if set, runs while the calling child waits
// for the answer.
type keyServer struct {
	name string
	srv  *httptest.Server

	mu        sync.Mutex // guards auths
	auths     []string
	onRequest func()
}

func newKeyServer(t *testing.T, name string, down bool) *keyServer {
	k := &keyServer{name: name}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		k.mu.Lock()
		k.auths = append(k.auths, r.Header.Get("Authorization"))
		on := k.onRequest
		k.mu.Unlock()
		if on != nil {
			on()
		}
		w.Header().Set("Content-Type", "application/json")
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"down","type":"server_error"}}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "answered by " + name}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
		})
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *keyServer) url() string { return k.srv.URL + "/v1" }

// takeAuths returns the Authorization headers received since the last call.
func (k *keyServer) takeAuths() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.auths
	k.auths = nil
	return out
}

// childrenOf returns the pids whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after its ')'.
		i := bytes.LastIndexByte(stat, ')')
		if f := strings.Fields(string(stat[i+1:])); i > 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// declaredKeysFile declares two intelligences with key sources of their own:
// alpha (key_env), beta (key_file) with a fallback of its own (key_env).
func declaredKeysFile(a, b, c, keyFile string) string {
	return `{
  "card": {"name": "keys", "skills": [
    {"id": "alpha", "name": "Alpha", "description": "On alpha.", "agent": "alpha"},
    {"id": "beta", "name": "Beta", "description": "On beta.", "agent": "beta"}]},
  "intelligences": {
    "alpha": {"endpoint": "` + a + `", "model": "ma", "key_env": "E2E_DECL_ALPHA_KEY"},
    "beta": {"endpoint": "` + b + `", "model": "mb", "retries": 0, "key_file": "` + keyFile + `",
             "fallbacks": [{"endpoint": "` + c + `", "model": "mc", "key_env": "E2E_DECL_GAMMA_KEY"}]}
  },
  "agents": {"default": "alpha", "types": {"alpha": {"intelligence": "alpha"}, "beta": {"intelligence": "beta"}}}
}`
}

// TestDeclaredEndpointKeys: the agents file's intelligences name their keys'
// sources (key_env, key_file, a fallback's key_env); a message naming each
// skill reaches its endpoints with their own keys, never the service's. The
// children get each key in a variable of its own, never the supervisor's
// variable, and no key is on a child's argv, in any log line or in the state
// directory. SIGHUP after the key file changed hands the new key to the
// children started after it, the warm pool's included; a reload whose key
// file cannot be read keeps the keys in force, logged at ERROR naming the key.
func TestDeclaredEndpointKeys(t *testing.T) {
	t.Parallel()
	const serviceKey, alphaKey, gammaKey, betaKey1, betaKey2 = "sk-service-e2e-0", "sk-alpha-e2e-1", "sk-gamma-e2e-3", "sk-beta-e2e-2a", "sk-beta-e2e-2b"
	allKeys := []string{serviceKey, alphaKey, gammaKey, betaKey1, betaKey2}
	a, b, c := newKeyServer(t, "alpha", false), newKeyServer(t, "beta", true), newKeyServer(t, "gamma", false)
	dir, stateDir := t.TempDir(), t.TempDir()
	keyFile, file := filepath.Join(dir, "beta.key"), filepath.Join(dir, "agents.json")
	writeFile(t, keyFile, betaKey1+"\n")
	writeFile(t, file, declaredKeysFile(a.url(), b.url(), c.url(), keyFile))
	s := startServiceAs(t, agentdBin, []string{"AGENT_INTELLIGENCE_KEY=" + serviceKey, "E2E_DECL_ALPHA_KEY=" + alphaKey, "E2E_DECL_GAMMA_KEY=" + gammaKey},
		"--intelligence", "builtin:demo", "--agents", file, "--warm-pool", "2", "--log-level", "debug", "--state-dir", stateDir)

	// While alpha is called, every child of the service (the caller and
	// the warm ones) is read: no key on its argv, alpha's key in a variable
	// of its own (every child has every declared key: a warm child starts
	// before it has a type), never the supervisor's variable.
	var seen struct {
		sync.Mutex
		children int
		keyVars  []string
		problems []string
	}
	a.mu.Lock()
	a.onRequest = func() {
		seen.Lock()
		defer seen.Unlock()
		for _, pid := range childrenOf(s.cmd.Process.Pid) {
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err != nil {
				continue // reaped meanwhile
			}
			if !slices.Contains(strings.Split(string(environ), "\x00"), api.EnvSubagent+"=1") {
				continue // forked, not yet exec'd: its argv and environ are still the supervisor's
			}
			cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if err != nil {
				continue // reaped meanwhile
			}
			seen.children++
			for _, k := range allKeys {
				if bytes.Contains(cmdline, []byte(k)) {
					seen.problems = append(seen.problems, "key on the argv of "+strconv.Itoa(pid))
				}
			}
			for _, kv := range strings.Split(string(environ), "\x00") {
				if strings.HasPrefix(kv, "E2E_DECL_") {
					seen.problems = append(seen.problems, "the supervisor's variable in a child: "+kv)
				}
				if v, ok := strings.CutSuffix(kv, "="+alphaKey); ok && !slices.Contains(seen.keyVars, v) {
					seen.keyVars = append(seen.keyVars, v)
				}
			}
		}
	}
	a.mu.Unlock()

	cl := s.client(t)
	send := func(skill, want string) {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "the question"})
		msg.Metadata = map[string]any{api.MetaSkill: skill}
		res, err := cl.SendMessage(context.Background(), &a2a.MessageSendParams{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
			t.Fatalf("skill %s: %+v, want completed %q", skill, res, want)
		}
	}
	wantAuths := func(k *keyServer, want ...string) {
		t.Helper()
		got := k.takeAuths()
		if len(got) != len(want) {
			t.Fatalf("%s got %q, want %q", k.name, got, want)
		}
		for i := range want {
			if got[i] != "Bearer "+want[i] {
				t.Errorf("%s request %d: Authorization %q, want the bearer of %q", k.name, i+1, got[i], want[i])
			}
		}
	}

	send("alpha", "answered by alpha")
	wantAuths(a, alphaKey)
	send("beta", "answered by gamma") // beta is down: its fallback answers
	wantAuths(b, betaKey1)
	wantAuths(c, gammaKey)
	seen.Lock()
	if seen.children < 1 || len(seen.keyVars) != 1 || !strings.HasPrefix(seen.keyVars[0], api.EnvIntelligenceKey+"_DECL_") || len(seen.problems) > 0 {
		t.Errorf("children while alpha was called: %d read, alpha's key in %v (want one AGENT_INTELLIGENCE_KEY_DECL_ variable), problems %v", seen.children, seen.keyVars, seen.problems)
	}
	seen.Unlock()

	// The key file rotates: after SIGHUP the next child (a warm one started
	// after the reload) sends the new key.
	writeFile(t, keyFile, betaKey2+"\n")
	hup := func(n int, what string) {
		t.Helper()
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, what, func() bool { return strings.Count(s.logs.String(), "SIGHUP: reloading") >= n })
	}
	hup(1, "the first reload")
	testkit.WaitFor(t, 10*time.Second, "the reload logged", func() bool { return strings.Contains(s.logs.String(), "SIGHUP: agents file loaded") })
	send("beta", "answered by gamma")
	wantAuths(b, betaKey2)
	wantAuths(c, gammaKey)

	// A key file that cannot be read: the reload is refused, the keys in
	// force stay.
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	hup(2, "the second reload")
	testkit.WaitFor(t, 10*time.Second, "the bad reload logged", func() bool { return strings.Contains(s.logs.String(), "the agents file did not load") })
	var line struct {
		Level string `json:"level"`
		Err   string `json:"err"`
	}
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, "the agents file did not load") {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line.Level != "ERROR" || !strings.Contains(line.Err, "intelligences.beta.key_file") {
		t.Errorf("the refused reload's log line: %+v", line)
	}
	send("beta", "answered by gamma")
	wantAuths(b, betaKey2)
	wantAuths(c, gammaKey)

	s.stop(t)
	for _, k := range allKeys {
		if strings.Contains(s.logs.String(), k) {
			t.Errorf("key %q in the log", k)
		}
	}
	_ = filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		content, _ := os.ReadFile(path)
		for _, k := range allKeys {
			if bytes.Contains(content, []byte(k)) {
				t.Errorf("key %q in %s", k, path)
			}
		}
		return nil
	})
}

// TestDeclaredEndpointKeyBadAtStart: a declared endpoint whose key cannot be
// read (an unset key_env, a missing, empty or open key_file) is bad config,
// exit 2, naming the key.
func TestDeclaredEndpointKeyBadAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile, empty, open := filepath.Join(dir, "beta.key"), filepath.Join(dir, "empty.key"), filepath.Join(dir, "open.key")
	writeFile(t, keyFile, "sk-beta\n")
	writeFile(t, empty, "\n")
	writeFile(t, open, "sk-open\n")
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	const u = "http://127.0.0.1:9/v1"
	serve := func(file string) []string {
		return []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--intelligence", "builtin:demo", "--agents", file}
	}
	write := func(name, keyFile string) string {
		path := filepath.Join(dir, name+".json")
		writeFile(t, path, declaredKeysFile(u, u, u+"2", keyFile))
		return path
	}
	gamma := "E2E_DECL_GAMMA_KEY=sk-gamma"
	// E2E_DECL_ALPHA_KEY is unset.
	wantUsageError(t, gamma, "intelligences.alpha.key_env: E2E_DECL_ALPHA_KEY is not set", serve(write("good", keyFile))...)
	for name, kf := range map[string]string{"missing": filepath.Join(dir, "nonesuch"), "empty": empty, "open": open} {
		out, code := runCombinedEnv(t, []string{"E2E_DECL_ALPHA_KEY=sk-alpha", gamma}, serve(write(name, kf))...)
		if code != 2 || !strings.Contains(out, "intelligences.beta.key_file") || strings.Contains(out, "sk-") {
			t.Errorf("%s key file: exit %d, output %q; want exit 2 naming intelligences.beta.key_file and no key", name, code, out)
		}
	}
}
