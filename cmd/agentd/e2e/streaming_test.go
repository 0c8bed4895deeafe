package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// sseChunk writes one Chat Completions stream chunk and flushes it.
func sseChunk(w http.ResponseWriter, delta map[string]any, finish string) {
	choice := map[string]any{"index": 0, "delta": delta}
	if finish != "" {
		choice["finish_reason"] = finish
	}
	b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{choice}})
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// sseEnd writes the usage chunk and [DONE].
func sseEnd(w http.ResponseWriter) {
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// streamWords streams words as text deltas, calling between(i) after the
// i-th has been flushed (it may wait for the client to see it), then ends
// with finish reason stop.
func streamWords(w http.ResponseWriter, words []string, between func(i int)) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i, word := range words {
		sseChunk(w, map[string]any{"content": word}, "")
		if between != nil {
			between(i)
		}
	}
	sseChunk(w, map[string]any{}, "stop")
	sseEnd(w)
}

// gate is a rendezvous with a deadline: a model server waits at it for the
// test's client to have seen a piece, and gives up (the test then fails on
// what its client saw) rather than hang.
type gate chan struct{}

func (g gate) wait() bool {
	select {
	case <-g:
		return true
	case <-time.After(20 * time.Second):
		return false
	}
}

// TestStreamedAnswerReachesTheClient: a streaming model's text reaches an
// A2A streaming client as it is produced, through the real binary (a
// re-exec'd child, the supervisor, the binding): the model server sends
// each word only after the client has seen the one before as an
// artifact-update event, so no event can have waited for the end. The
// events append to the distillate artifact, the last is lastChunk, then
// the final status; the pieces concatenated are the stored artifact's
// text, which tasks/get shows whole, in one part, as message/send does.
// Over JSON-RPC 0.3 (a2a-go's client) and 1.0 (SendStreamingMessage).
func TestStreamedAnswerReachesTheClient(t *testing.T) {
	t.Parallel()
	words := []string{"Streamed ", "answer ", "in ", "five ", "words."}
	whole := strings.Join(words, "")
	var mu sync.Mutex
	var seen []gate // seen[i] closes when the client has seen word i
	reset := func() {
		mu.Lock()
		defer mu.Unlock()
		seen = make([]gate, len(words))
		for i := range seen {
			seen[i] = make(gate)
		}
	}
	reset()
	at := func(i int) gate { mu.Lock(); defer mu.Unlock(); return seen[i] }
	gated := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if !body.Stream {
			t.Errorf("the child asked for no stream")
		}
		mu.Lock()
		g := gated
		mu.Unlock()
		streamWords(w, words, func(i int) {
			if g && i < len(words)-1 && !at(i).wait() {
				t.Errorf("the client did not see word %d before the model sent the next", i)
			}
		})
	}))
	defer srv.Close()
	s := startService(t, "--intelligence", srv.URL+"/v1", "--model", "m")

	check := func(proto string, pieces []string, appends []bool, last []bool, final a2a.TaskState) {
		t.Helper()
		if len(pieces) < len(words) {
			t.Errorf("%s: %d artifact events %q, want at least one per word", proto, len(pieces), pieces)
		}
		if strings.Join(pieces, "") != whole {
			t.Errorf("%s: pieces %q, concatenated, are not %q", proto, pieces, whole)
		}
		for i := range pieces {
			if appends[i] != (i > 0) || last[i] != (i == len(pieces)-1) {
				t.Errorf("%s: event %d append %v lastChunk %v: want the first new, the others appended, the last lastChunk", proto, i, appends[i], last[i])
			}
		}
		if final != a2a.TaskStateCompleted {
			t.Errorf("%s: final state %s", proto, final)
		}
	}

	// 0.3: message/stream with a2a-go's client.
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var pieces []string
	var appends, lasts []bool
	var final a2a.TaskState
	var taskID a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, textMessage("stream to me")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			taskID = v.ID
		case *a2a.TaskArtifactUpdateEvent:
			if final != "" {
				t.Errorf("an artifact event after the final status")
			}
			var text string
			for _, p := range v.Artifact.Parts {
				text += p.(a2a.TextPart).Text
			}
			pieces, appends, lasts = append(pieces, text), append(appends, v.Append), append(lasts, v.LastChunk)
			if n := len(pieces) - 1; n < len(words) && text == words[n] {
				close(at(n))
			}
		case *a2a.TaskStatusUpdateEvent:
			if v.Status.State.Terminal() {
				final = v.Status.State
			}
		}
	}
	check("0.3", pieces, appends, lasts, final)
	task, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: taskID})
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 || artifactText(task) != whole {
		t.Errorf("tasks/get: %d artifacts %+v, want one whole artifact %q", len(task.Artifacts), task.Artifacts, whole)
	}

	// 1.0: SendStreamingMessage, read as the wire has it.
	reset()
	params := `{"message":{"messageId":"stream-10","role":"ROLE_USER","parts":[{"text":"stream to me"}]}}`
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":`+params+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	pieces, appends, lasts, final = nil, nil, nil, ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r struct {
			Result struct {
				ArtifactUpdate *struct {
					Artifact struct {
						Parts []struct {
							Text string `json:"text"`
						} `json:"parts"`
					} `json:"artifact"`
					Append    bool `json:"append"`
					LastChunk bool `json:"lastChunk"`
				} `json:"artifactUpdate"`
				StatusUpdate *struct {
					Status struct {
						State string `json:"state"`
					} `json:"status"`
				} `json:"statusUpdate"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("1.0 event %s: %v", data, err)
		}
		if a := r.Result.ArtifactUpdate; a != nil {
			var text string
			for _, p := range a.Artifact.Parts {
				text += p.Text
			}
			pieces, appends, lasts = append(pieces, text), append(appends, a.Append), append(lasts, a.LastChunk)
			if n := len(pieces) - 1; n < len(words) && text == words[n] {
				close(at(n))
			}
		}
		if su := r.Result.StatusUpdate; su != nil && su.Status.State == "TASK_STATE_COMPLETED" {
			final = a2a.TaskStateCompleted
		}
	}
	check("1.0", pieces, appends, lasts, final)

	// A caller that does not stream sees what it always saw: the task, its
	// one artifact whole.
	mu.Lock()
	gated = false
	mu.Unlock()
	res, err := c.SendMessage(ctx, textMessage("do not stream to me"))
	if err != nil {
		t.Fatal(err)
	}
	if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 || artifactText(task) != whole {
		t.Errorf("message/send: %+v", res)
	}
}

var handleRE = regexp.MustCompile(`\\?"handle\\?":\s*\\?"([^"\\]+)`)

// TestChildTextStreamsToTheRootNotToTheParentModel: a child's streamed text
// reaches the root task's streaming client (artifact events of the child's
// distillate artifact, naming the child's task) while the child runs, and
// never the parent's model: the parent's model call made while the child's
// text is out (and the child still running) does not hold it; the one after
// the child ended holds its result.
func TestChildTextStreamsToTheRootNotToTheParentModel(t *testing.T) {
	t.Parallel()
	childWords := []string{"zebra-one ", "zebra-two ", "zebra-three"}
	childText := strings.Join(childWords, "")
	childSeen, parentAsked := make(gate), make(gate) // the client saw the child's first word; the parent's model call mid-child was made
	var mu sync.Mutex
	var parentBodies []string
	var handle string
	call := func(w http.ResponseWriter, name, args string) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseChunk(w, map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "c1", "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}}, "tool_calls")
		sseEnd(w)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(b, &body)
		// The objective is the first user turn (after the system prompt).
		if len(body.Messages) > 1 && body.Messages[1].Role == "user" && body.Messages[1].Content == "CHILD-OBJECTIVE" {
			streamWords(w, childWords, func(i int) {
				if i == 0 && !(childSeen.wait() && parentAsked.wait()) {
					t.Error("the child's first word did not reach the client, or the parent made no model call meanwhile")
				}
			})
			return
		}
		mu.Lock()
		parentBodies = append(parentBodies, string(b))
		n := len(parentBodies)
		if m := handleRE.FindStringSubmatch(string(b)); m != nil && handle == "" {
			handle = m[1]
		}
		h := handle
		mu.Unlock()
		switch n {
		case 1:
			call(w, "subagent_spawn", `{"contract":{"objective":"CHILD-OBJECTIVE","output_format":{"kind":"text"}},"disposition":"async"}`)
		case 2: // the child runs: a status call, answered once its text is out
			if !childSeen.wait() {
				t.Error("the child's text did not reach the client")
			}
			call(w, "subagent_status", fmt.Sprintf(`{"handle":%q}`, h))
		case 3: // made while the child's text is out and it still runs
			close(parentAsked)
			call(w, "subagent_await", fmt.Sprintf(`{"handle":%q}`, h))
		default:
			streamWords(w, []string{"parent ", "done"}, nil)
		}
	}))
	defer srv.Close()
	s := startService(t, "--intelligence", srv.URL+"/v1", "--model", "m")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var childPieces []string
	var rootTask a2a.TaskID
	var streamTask any
	var final a2a.TaskState
	for ev, err := range s.client(t).SendStreamingMessage(ctx, textMessage("delegate it")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			rootTask = v.ID
		case *a2a.TaskArtifactUpdateEvent:
			if v.Artifact.ID == a2a.ArtifactID(string(rootTask)+".distillate") {
				continue
			}
			streamTask = v.Metadata[api.MetaStreamTask]
			for _, p := range v.Artifact.Parts {
				childPieces = append(childPieces, p.(a2a.TextPart).Text)
			}
			if len(childPieces) == 1 {
				close(childSeen)
			}
		case *a2a.TaskStatusUpdateEvent:
			if v.Status.State.Terminal() {
				final = v.Status.State
			}
		}
	}
	if final != a2a.TaskStateCompleted {
		t.Fatalf("root ended %s", final)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(childPieces, "") != childText || streamTask != handle || handle == "" {
		t.Errorf("the root's stream showed the child's text as %q (task %v), want %q (task %s)", childPieces, streamTask, childText, handle)
	}
	if len(parentBodies) != 4 {
		t.Fatalf("%d parent model calls, want 4", len(parentBodies))
	}
	for i, b := range parentBodies[:3] {
		if strings.Contains(b, "zebra") {
			t.Errorf("parent model call %d, made before the child ended, holds the child's text: %s", i+1, b)
		}
	}
	if !strings.Contains(parentBodies[3], "zebra-three") {
		t.Errorf("the parent's call after the child ended lacks its result: %s", parentBodies[3])
	}
}

// TestStreamCutMidway: a model stream cut mid-way (the connection closed
// after some text) ends the task failed, with a detail naming the cut, at
// once: no retry, no hang, the streaming client sees the final status.
func TestStreamCutMidway(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		sseChunk(w, map[string]any{"content": "half an ans"}, "")
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	s := startService(t, "--intelligence", srv.URL+"/v1", "--model", "m")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var final *a2a.TaskStatusUpdateEvent
	var sawText bool
	for ev, err := range s.client(t).SendStreamingMessage(ctx, textMessage("answer")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			sawText = true
		case *a2a.TaskStatusUpdateEvent:
			if v.Status.State.Terminal() {
				final = v
			}
		}
	}
	if final == nil || final.Status.State != a2a.TaskStateFailed || final.Metadata[api.MetaStatus] != string(api.StatusCrashed) {
		t.Fatalf("final status %+v, want failed (crashed)", final)
	}
	detail := ""
	if final.Status.Message != nil {
		for _, p := range final.Status.Message.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				detail += tp.Text
			}
		}
	}
	if !strings.Contains(detail, "stream ended before") || !sawText {
		t.Errorf("detail %q (text seen %v): want the cut named, after the text streamed", detail, sawText)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("%d model calls: a stream cut after its text went out is not retried", calls)
	}
}

// startMockLLM runs the third-party OpenAI-compatible mock model server
// (npm @dwmkerr/mock-llm, installed in js/node_modules by `make test-deps`)
// with config (its YAML) on a free loopback port, and returns its base URL
// (…/v1). It is killed and reaped at cleanup.
func startMockLLM(t *testing.T, config string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (Node.js 20+) is required for the mock model server: install it, then run `make test-deps`")
	}
	dir, _ := filepath.Abs("js")
	main := filepath.Join(dir, "node_modules", "@dwmkerr", "mock-llm", "dist", "main.js")
	if _, err := os.Stat(main); err != nil {
		t.Fatal("@dwmkerr/mock-llm is not installed in cmd/agentd/e2e/js/node_modules: run `make test-deps`")
	}
	cfg := filepath.Join(t.TempDir(), "mock-llm.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// mock-llm takes its port from PORT and cannot be handed a listener: a
	// port found free by binding port 0 could be taken by another test's
	// process before node binds it (one run saw this test's health poll
	// reach another package's model server on the port it had picked, and
	// mock-llm exit with EADDRINUSE). The port comes from below the
	// ephemeral range (testkit.FreePort), where no such listener is served;
	// a start that loses it all the same is tried again on another port.
	for attempt := 1; ; attempt++ {
		url, err := startMockLLMOnce(t, node, main, cfg)
		if err == nil {
			return url + "/v1"
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("mock-llm start %d: %v; trying another port", attempt, err)
	}
}

// errPortTaken is a mock-llm start that lost its port to another process.
var errPortTaken = errors.New("mock-llm: its port was taken (EADDRINUSE)")

// startMockLLMOnce starts mock-llm on a port found free and waits until it
// serves: errPortTaken when it could not bind the port. The process, served
// or not, is killed and reaped at cleanup.
func startMockLLMOnce(t *testing.T, node, main, cfg string) (string, error) {
	port, err := testkit.FreePort()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(node, main, "--config", cfg)
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port))
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("mock-llm output (port %d):\n%s", port, out.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	// A poll is bounded: a port taken by another process may accept and
	// never answer.
	client := &http.Client{Timeout: time.Second}
	for {
		// node logs a failed listen, and may exit or live on.
		if strings.Contains(out.String(), "EADDRINUSE") {
			return "", fmt.Errorf("%w: port %d", errPortTaken, port)
		}
		select {
		case <-exited: // its output is whole (Wait copied it all)
			if strings.Contains(out.String(), "EADDRINUSE") {
				return "", fmt.Errorf("%w: port %d", errPortTaken, port)
			}
			return "", fmt.Errorf("mock-llm exited before serving:\n%s", out.String())
		default:
		}
		// Its own answer, not another server's on a port it lost.
		if resp, err := client.Get(url + "/health"); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"healthy"`) {
				return url, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("mock-llm serving on port %d: not within 20s", port)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestStreamingFromTheMockLLM: the third-party mock model server streams
// its answer in chunks of 6 characters 15 ms apart (its streaming.chunkSize
// and chunkIntervalMs) to a real child; an A2A streaming client sees
// several artifact-update events, the first starting the distillate
// artifact and the others appended, the last lastChunk, then the final
// status; their concatenation is the stored artifact's text.
func TestStreamingFromTheMockLLM(t *testing.T) {
	t.Parallel()
	answer := "The quick brown fox jumps over the lazy dog, twice over."
	url := startMockLLM(t, `streaming:
  chunkSize: 6
  chunkIntervalMs: 15
rules:
  - path: "/v1/chat/completions"
    match: "@"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "mock", "created": 1,
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "`+answer+`"}, "finish_reason": "stop"}]}
`)
	s := startService(t, "--intelligence", url, "--model", "mock")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := s.client(t)
	var pieces []string
	var appends, lasts []bool
	var final a2a.TaskState
	var id a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, textMessage("say it")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			id = v.ID
		case *a2a.TaskArtifactUpdateEvent:
			var text string
			for _, p := range v.Artifact.Parts {
				text += p.(a2a.TextPart).Text
			}
			pieces, appends, lasts = append(pieces, text), append(appends, v.Append), append(lasts, v.LastChunk)
		case *a2a.TaskStatusUpdateEvent:
			if v.Status.State.Terminal() {
				final = v.Status.State
			}
		}
	}
	if final != a2a.TaskStateCompleted || len(pieces) < 3 || strings.Join(pieces, "") != answer {
		t.Fatalf("final %s, pieces %q: want completed after several pieces making %q", final, pieces, answer)
	}
	for i := range pieces {
		if appends[i] != (i > 0) || lasts[i] != (i == len(pieces)-1) {
			t.Errorf("piece %d: append %v lastChunk %v", i, appends[i], lasts[i])
		}
	}
	task, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil || len(task.Artifacts) != 1 || artifactText(task) != answer {
		t.Fatalf("tasks/get: %+v, %v", task, err)
	}
}

// TestSendStreamPrintsTextAsItComes: `agentd send --stream` against a
// scripted model whose answers stream a word at a time (builtin:script's
// stream step, no network model): the root's answer prints on one line as
// its pieces come, and so does its child's (whose text reached the root's
// stream), named by its agent path.
func TestSendStreamPrintsTextAsItComes(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(script, []byte(`[depth 0]
stream 15ms
spawn sync "child objective"
answer "The root says: {results} and done"
[depth 1]
stream 15ms
answer "child words one two three four"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "--intelligence", "builtin:script="+script)
	cmd := agentdCommand(t, "send", "--stream", "--progress=false", "--to", s.url, "go")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("send --stream: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	var root, child bool
	for _, l := range lines {
		root = root || (strings.HasPrefix(l, "artifact ") && strings.HasSuffix(l, ".distillate: The root says: child words one two three four and done"))
		child = child || (strings.HasPrefix(l, "artifact ") && strings.HasSuffix(l, ".distillate (0.1): child words one two three four"))
	}
	if !root || !child {
		t.Errorf("send --stream printed:\n%s\nwant the root's and the child's text each on a line of its own", out)
	}
}
