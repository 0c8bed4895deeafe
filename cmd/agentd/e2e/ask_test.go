package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.1: a subagent asks (subagent.ask), the question reaches the
// task's caller as input-required, and the caller's answer (a message
// naming the task) is the asker's tool result.

// askScripts are scripts that ask at depth 0, 1 and 2, and the answer each
// run ends with when the caller answers "blue".
var askScripts = []struct {
	name, script, path, want string
}{
	{"depth0", "[depth 0]\nask \"Which color?\" choices=red,blue\nanswer \"root got {answer}\"\n", "0", "root got blue"},
	// The parent passes the question up (pass): the caller answers, the
	// parent's subagent.ask returns the answer and the child gets it.
	{"depth1-passed-up", "[depth 0]\nspawn sync \"child\"\npass 1\nawait\nanswer \"root: {results}\"\n" +
		"[depth 1]\nask \"Which color?\" choices=red,blue\nanswer \"child got {answer}\"\n", "0.1", "root: child got blue"},
	{"depth2-passed-up-twice", "[depth 0]\nspawn sync \"mid\"\npass 1\nawait\nanswer \"root: {results}\"\n" +
		"[depth 1]\nspawn async \"leaf\"\nawait\npass 1\nawait\nanswer \"mid: {results}\"\n" +
		"[depth 2]\nask \"Which color?\" choices=red,blue\nanswer \"leaf got {answer}\"\n", "0.1.1", "root: mid: leaf got blue"},
}

// questionOf checks that task is input-required with the question "Which
// color?" of the subagent at path, choices red and blue.
func questionOf(t *testing.T, task *a2a.Task, path string) {
	t.Helper()
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil {
		t.Fatalf("task %s: %+v, want input-required with the question", task.ID, task.Status)
	}
	m := task.Status.Message
	if txt := m.Parts[0].(a2a.TextPart).Text; txt != "Which color?" {
		t.Fatalf("the question = %q", txt)
	}
	if got := m.Metadata[api.MetaAskPath]; got != path {
		t.Fatalf("%s = %v, want %s", api.MetaAskPath, got, path)
	}
	if got := fmt.Sprint(m.Metadata[api.MetaAskChoices]); got != "[red blue]" {
		t.Fatalf("%s = %v, want [red blue]", api.MetaAskChoices, got)
	}
}

// answerTo is the message that answers task with text.
func answerTo(task *a2a.Task, text string) *a2a.MessageSendParams {
	m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.TextPart{Text: text})
	return &a2a.MessageSendParams{Message: m}
}

// answer sends text, blocking, as the answer to task's question over c and
// returns the task it is answered with.
func answer(t *testing.T, c *a2aclient.Client, task *a2a.Task, text string) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), answerTo(task, text))
	if err != nil {
		t.Fatal(err)
	}
	return res.(*a2a.Task)
}

// wantCompleted fails t unless task completed with the artifact text want.
func wantCompleted(t *testing.T, task *a2a.Task, want string) {
	t.Helper()
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
		t.Fatalf("after the answer: %s %q (%+v), want completed %q", task.Status.State, artifactText(task), task.Status.Message, want)
	}
}

// A blocking send returns the input-required task; the answer, sent
// blocking too, returns the task completed with the asker's answer in it;
// at depth 0 (the root asks), 1 and 2 (each parent passes it up).
func TestAskBlocking03(t *testing.T) {
	t.Parallel()
	for _, tc := range askScripts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startService(t, "--intelligence", "builtin:script="+writeScript(t, tc.script))
			c := s.client(t)
			ctx := context.Background()
			res, err := c.SendMessage(ctx, textMessage("pick a color"))
			if err != nil {
				t.Fatal(err)
			}
			task := res.(*a2a.Task)
			questionOf(t, task, tc.path)
			res, err = c.SendMessage(ctx, answerTo(task, "blue"))
			if err != nil {
				t.Fatal(err)
			}
			done := res.(*a2a.Task)
			if done.Status.State != a2a.TaskStateCompleted || artifactText(done) != tc.want {
				t.Fatalf("after the answer: %s %q, want completed %q", done.Status.State, artifactText(done), tc.want)
			}
		})
	}
}

// A stream shows working, input-required (with the question), working again
// once the answer is taken, and completed; the webhook is told of the
// input-required state; the answer (a non-blocking send) is answered with
// the task working again.
func TestAskStreamAndPush03(t *testing.T) {
	t.Parallel()
	hook := newHeldHook(t)
	hook.release()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[1].script), "--push-allow-net", "127.0.0.0/8")
	c := s.client(t)
	ctx := context.Background()
	msg := textMessage("pick a color")
	msg.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: hook.URL + "/hook"}}
	var states []a2a.TaskState
	var final *a2a.TaskStatusUpdateEvent
	for ev, err := range c.SendStreamingMessage(ctx, msg) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			states = append(states, v.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, v.Status.State)
			final = v
			if v.Status.State != a2a.TaskStateInputRequired {
				continue
			}
			questionOf(t, &a2a.Task{ID: v.TaskID, ContextID: v.ContextID, Status: v.Status}, "0.1")
			testkit.WaitFor(t, 10*time.Second, "the webhook told of input-required", func() bool { return hook.toldOf(string(v.TaskID), "input-required") })
			res, err := c.SendMessage(ctx, nonBlocking(answerTo(&a2a.Task{ID: v.TaskID, ContextID: v.ContextID}, "blue")))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.(*a2a.Task).Status.State; got != a2a.TaskStateWorking {
				t.Fatalf("the answer's send: %s, want working", got)
			}
		}
	}
	i := slices.Index(states, a2a.TaskStateInputRequired)
	if i < 1 || !slices.Contains(states[:i], a2a.TaskStateWorking) || !slices.Contains(states[i:], a2a.TaskStateWorking) || states[len(states)-1] != a2a.TaskStateCompleted {
		t.Fatalf("states = %v, want working, input-required, working, completed", states)
	}
	if final == nil || !final.Final {
		t.Fatalf("the stream's last status: %+v", final)
	}
	testkit.WaitFor(t, 10*time.Second, "the webhook told of the end", func() bool { return hook.toldOf(string(final.TaskID), "completed") })
}

// The 1.0 JSON-RPC binding: a blocking SendMessage returns the task
// TASK_STATE_INPUT_REQUIRED with the question; a SendMessage naming the task
// answers it and returns it completed.
func TestAskBlocking10(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[0].script))
	type v1Task struct {
		Task struct {
			ID        string `json:"id"`
			ContextID string `json:"contextId"`
			Status    struct {
				State   string `json:"state"`
				Message struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
					Metadata map[string]any `json:"metadata"`
				} `json:"message"`
			} `json:"status"`
			Artifacts []struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	var asked v1Task
	if e := rpc(t, s, "1.0", "SendMessage", `{"message":{"messageId":"ask10-1","role":"ROLE_USER","parts":[{"text":"pick a color"}]}}`, &asked); e != nil {
		t.Fatalf("SendMessage: %+v", e)
	}
	st := asked.Task.Status
	if st.State != "TASK_STATE_INPUT_REQUIRED" || len(st.Message.Parts) != 1 || st.Message.Parts[0].Text != "Which color?" ||
		st.Message.Metadata[api.MetaAskPath] != "0" || fmt.Sprint(st.Message.Metadata[api.MetaAskChoices]) != "[red blue]" {
		t.Fatalf("the blocking send: %+v, want input-required with the question", asked.Task)
	}
	var done v1Task
	params := fmt.Sprintf(`{"message":{"messageId":"ask10-2","role":"ROLE_USER","taskId":%q,"parts":[{"text":"blue"}]}}`, asked.Task.ID)
	if e := rpc(t, s, "1.0", "SendMessage", params, &done); e != nil {
		t.Fatalf("SendMessage (the answer): %+v", e)
	}
	if done.Task.Status.State != "TASK_STATE_COMPLETED" || len(done.Task.Artifacts) != 1 || done.Task.Artifacts[0].Parts[0].Text != "root got blue" {
		t.Fatalf("after the answer: %+v", done.Task)
	}
}

// The parent's model answers its child's question itself (subagent.answer):
// the task never goes input-required.
func TestAskAnsweredByTheParent(t *testing.T) {
	t.Parallel()
	script := "[depth 0]\nspawn async \"child\"\nawait\nreply 1 \"green, says the root\"\nawait\nanswer \"root: {results}\"\n" +
		"[depth 1]\nask \"Which color?\"\nanswer \"child got {answer}\"\n"
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, script))
	c := s.client(t)
	var states []a2a.TaskState
	var id a2a.TaskID
	for ev, err := range c.SendStreamingMessage(context.Background(), textMessage("go")) {
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			states, id = append(states, v.Status.State), v.TaskID
		}
	}
	if slices.Contains(states, a2a.TaskStateInputRequired) || states[len(states)-1] != a2a.TaskStateCompleted {
		t.Fatalf("states = %v, want completed and never input-required", states)
	}
	task, err := c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got := artifactText(task); got != "root: child got green, says the root" {
		t.Fatalf("artifact = %q", got)
	}
}

// rpcAs calls method as the caller of token (0.3) and decodes its result
// into out; it returns the error object, if any.
func rpcAs(t *testing.T, s *service, token, method string, params any, out any) *rpcError {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r rpcReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if r.Error == nil && out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	return r.Error
}

// answerParams is a non-blocking message/send naming task id.
func answerParams(id, text string) map[string]any {
	return map[string]any{
		"message":       map[string]any{"messageId": fmt.Sprintf("a-%d", time.Now().UnixNano()), "taskId": id, "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}},
		"configuration": map[string]any{"blocking": false},
	}
}

// Bad answers change nothing: one from another caller is told the task does
// not exist, one over api.MaxAnswer is invalid params (the task stays
// input-required, its history as it was); the caller's answer then works; an
// answer to the task once it has ended is refused, and the task is unchanged.
func TestAskBadAnswers(t *testing.T) {
	t.Parallel()
	s := startAdmService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[0].script))
	var task wireTask
	if e := rpcAs(t, s.service, floodToken, "message/send", sendParams("pick a color", false), &task); e != nil {
		t.Fatalf("send: %+v", e)
	}
	get := func() wireTask {
		t.Helper()
		var got wireTask
		if e := rpcAs(t, s.service, floodToken, "tasks/get", map[string]any{"id": task.ID}, &got); e != nil {
			t.Fatalf("tasks/get: %+v", e)
		}
		return got
	}
	testkit.WaitFor(t, 20*time.Second, "the task input-required", func() bool { return get().Status.State == "input-required" })
	before := get()
	if e := rpcAs(t, s.service, otherToken, "message/send", answerParams(task.ID, "red"), nil); e == nil || e.Code != -32001 {
		t.Errorf("an answer from another caller: %+v, want -32001 (task not found)", e)
	}
	if e := rpcAs(t, s.service, floodToken, "message/send", answerParams(task.ID, strings.Repeat("b", api.MaxAnswer+1)), nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message+string(e.Data), "over the limit") {
		t.Errorf("an answer over the limit: %+v, want -32602 naming the limit", e)
	}
	if after := get(); after.Status.State != "input-required" || len(after.History) != len(before.History) {
		t.Fatalf("after the bad answers: %s with %d history messages, want input-required with %d", after.Status.State, len(after.History), len(before.History))
	}
	if e := rpcAs(t, s.service, floodToken, "message/send", answerParams(task.ID, "blue"), nil); e != nil {
		t.Fatalf("the answer: %+v", e)
	}
	testkit.WaitFor(t, 20*time.Second, "the task completed", func() bool { return get().Status.State == "completed" })
	done := get()
	if e := rpcAs(t, s.service, floodToken, "message/send", answerParams(task.ID, "red"), nil); e == nil || e.Code != -32004 {
		t.Errorf("an answer to a finished task: %+v, want -32004", e)
	}
	if after := get(); after.Status.State != "completed" || len(after.History) != len(done.History) {
		t.Fatalf("after the late answer: %s with %d history messages, want completed with %d", after.Status.State, len(after.History), len(done.History))
	}
}

// A question no one answers within --input-timeout fails the task: status
// deadline, cause input_timeout; the asking subagent's process is gone.
func TestAskInputTimeout(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[0].script), "--input-timeout", "300ms")
	c := s.client(t)
	res, err := c.SendMessage(context.Background(), textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, "0")
	var got *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "the task ended", func() bool {
		got, err = c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
		return err == nil && got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaStatus] != string(api.StatusDeadline) || got.Metadata[api.MetaCause] != api.CauseInputTimeout {
		t.Fatalf("after the input timeout: %s %v, want failed, deadline, input_timeout", got.Status.State, got.Metadata)
	}
	testkit.WaitFor(t, 10*time.Second, "no child left", func() bool { return len(testkit.Children(s.cmd.Process.Pid)) == 0 })
}

// The third-party OpenAI-compatible mock model asks through a real tool
// call of subagent_ask (offered to it among the tools of the request), and
// answers with the tool result it is then sent: the caller's answer.
// mock-llm 0.1.29 streams only an answer's text (its streamed chunks drop
// tool_calls), so the requests reach it through a proxy that takes
// "stream": true out: it answers with whole completions, which agentd
// reads as it reads any server that does not stream.
func TestAskFromTheMockLLM(t *testing.T) {
	t.Parallel()
	url := unstreamed(t, startMockLLM(t, askingMockRules("call_1")))
	s := startService(t, "--intelligence", url, "--model", "mock")
	c := s.client(t)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, "0")
	res, err = c.SendMessage(ctx, answerTo(task, "blue"))
	if err != nil {
		t.Fatal(err)
	}
	if done := res.(*a2a.Task); done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "the person chose blue" {
		t.Fatalf("after the answer: %s %q", done.Status.State, artifactText(done))
	}
}

// unstreamed is a proxy to the Chat Completions endpoint at target (…/v1)
// that removes "stream" and "stream_options" from each request body.
func unstreamed(t *testing.T, target string) string {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&neturl.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		delete(body, "stream")
		delete(body, "stream_options")
		b, _ := json.Marshal(body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		r.Header.Del("Accept")
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// tasks/cancel of a task that waits for an answer ends it canceled, with
// the waiting subagents' processes gone.
func TestAskCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[2].script))
	c := s.client(t)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, "0.1.1")
	// Every subagent of the tree is a child of agentd's, and all three stay
	// while the leaf waits: the leaf and the two that pass its question up.
	if n := len(testkit.Children(s.cmd.Process.Pid)); n != 3 {
		t.Fatalf("%d child processes of agentd while the leaf asks, want 3", n)
	}
	got, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	testkit.WaitFor(t, 10*time.Second, "no child left", func() bool { return len(testkit.Children(s.cmd.Process.Pid)) == 0 })
}

// Issue 32.3: with --approve exec, the root's subagent.exec waits for a
// person's yes: the task goes input-required naming the call (tool,
// arguments, the subagent); "yes" runs the command, "no" is an error result
// the model sees (the command never runs), and no answer within
// --input-timeout fails the task.
func TestApprovalGateExec(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\ncall subagent.exec {\"argv\":[\"echo\",\"gated-hello\"]}\nanswer \"{transcript}\"\n")
	s := startService(t, "--intelligence", "builtin:script="+script, "--allow-exec", "--approve", "exec")
	c := s.client(t)
	ctx := context.Background()
	for _, tc := range []struct{ answer, want, not string }{
		{"yes", "gated-hello", "was not run"},
		{"no", `subagent.exec was not run: the person asked did not approve it (answered "no")`, "gated-hello"},
	} {
		res, err := c.SendMessage(ctx, textMessage("run it"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		m := task.Status.Message
		if task.Status.State != a2a.TaskStateInputRequired || m == nil || m.Metadata[api.MetaAskTool] != api.ToolExec ||
			fmt.Sprint(m.Metadata[api.MetaAskArguments]) != "map[argv:[echo gated-hello]]" || m.Metadata[api.MetaAskPath] != "0" ||
			fmt.Sprint(m.Metadata[api.MetaAskChoices]) != "[yes no]" {
			t.Fatalf("the gated call: %s %+v, want input-required naming subagent.exec and its arguments", task.Status.State, m)
		}
		res, err = c.SendMessage(ctx, answerTo(task, tc.answer))
		if err != nil {
			t.Fatal(err)
		}
		done := res.(*a2a.Task)
		if got := artifactText(done); done.Status.State != a2a.TaskStateCompleted || !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Fatalf("answered %q: %s %q, want completed with %q", tc.answer, done.Status.State, got, tc.want)
		}
	}

	timed := startService(t, "--intelligence", "builtin:script="+script, "--allow-exec", "--approve", "exec", "--input-timeout", "300ms")
	tc := timed.client(t)
	res, err := tc.SendMessage(ctx, textMessage("run it"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	var got *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "the task ended", func() bool {
		got, err = tc.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
		return err == nil && got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaCause] != api.CauseInputTimeout {
		t.Fatalf("an approval no one gave: %s %v, want failed, input_timeout", got.Status.State, got.Metadata)
	}
}

// The wait for an answer does not count against the asker's deadline: a
// root with a 1.5 s deadline waits 2.5 s for its answer, then completes
// with it. With --input-charges-deadline it counts: the run ends at its
// deadline while it waits.
func TestAskWaitNotChargedToTheDeadline(t *testing.T) {
	t.Parallel()
	script := writeScript(t, askScripts[0].script)
	s := startService(t, "--intelligence", "builtin:script="+script, "--deadline", "1500ms")
	c := s.client(t)
	ctx := context.Background()
	sent := time.Now()
	res, err := c.SendMessage(ctx, textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, "0")
	testkit.WaitFor(t, 20*time.Second, "2.5 s past the send, the task still waiting", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("while it waits: %+v %v", got, err)
		}
		return time.Since(sent) > 2500*time.Millisecond
	})
	res, err = c.SendMessage(ctx, answerTo(task, "blue"))
	if err != nil {
		t.Fatal(err)
	}
	if done := res.(*a2a.Task); done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "root got blue" {
		t.Fatalf("after the answer: %s %q", done.Status.State, artifactText(done))
	}

	charged := startService(t, "--intelligence", "builtin:script="+script, "--deadline", "1500ms", "--input-charges-deadline")
	cc := charged.client(t)
	res, err = cc.SendMessage(ctx, textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	var got *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "the charged task ended", func() bool {
		got, err = cc.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
		return err == nil && got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaStatus] != string(api.StatusDeadline) {
		t.Fatalf("with --input-charges-deadline: %s %v, want failed, deadline", got.Status.State, got.Metadata)
	}
}

// askingMockRules are mock-llm's rules for a model that asks: a request
// offering subagent_ask gets a call of it (id callID; "Which color?",
// choices red and blue), and the request carrying its tool result gets the
// answer "the person chose RESULT".
func askingMockRules(callID string) string {
	return `rules:
  - path: "/v1/chat/completions"
    match: "contains(body.tools[*].function.name, 'subagent_ask')"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "mock", "created": 1,
         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "",
           "tool_calls": [{"id": "` + callID + `", "type": "function", "function": {"name": "subagent_ask",
             "arguments": "{\"question\": \"Which color?\", \"choices\": [\"red\", \"blue\"]}"}}]}}]}
  - path: "/v1/chat/completions"
    match: "body.messages[-1].role == 'tool'"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-2", "object": "chat.completion", "model": "mock", "created": 1,
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "the person chose {{jmes request body.messages[-1].content}}"}}]}
`
}
