package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32 items 3 and 6, the operator's side: a2a.Questions lists the
// questions and approvals tasks wait on, a2a.Answer (and `agentd ctl
// answer`, `approve`, `deny`) answers one on the caller's behalf.

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// clientAs is an a2a-go client of s that calls as token's holder.
func clientAs(t *testing.T, s *service, token string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, s.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{Transport: bearer{token, http.DefaultTransport}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// questions is a2a.Questions as the operator, with params.
func questions(t *testing.T, s *admService, params any) []api.PendingQuestion {
	t.Helper()
	var res api.QuestionsResult
	s.call(opToken, api.OpQuestions, params, &res)
	return res.Questions
}

// A task's question, while its caller streams the task and never answers:
// the operator lists it (asker, handle, choices, caller, since), bad
// answers and a non-operator's calls change nothing, and the operator's
// answer reaches the asker: the caller's stream shows input-required then
// working, the answer joins the history naming the operator, and each call
// is in the audit trail.
func TestOperatorAnswersAQuestion(t *testing.T) {
	t.Parallel()
	s := startAdmService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[1].script))
	if qs := questions(t, s, nil); len(qs) != 0 {
		t.Fatalf("questions before any task: %+v", qs)
	}
	c := clientAs(t, s.service, floodToken)
	asked := make(chan a2a.TaskID, 1)
	type streamed struct {
		states []a2a.TaskState
		err    error
	}
	out := make(chan streamed, 1)
	go func() {
		var r streamed
		for ev, err := range c.SendStreamingMessage(context.Background(), textMessage("pick a color")) {
			if err != nil {
				r.err = err
				break
			}
			if v, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
				r.states = append(r.states, v.Status.State)
				if v.Status.State == a2a.TaskStateInputRequired {
					asked <- v.TaskID
				}
			}
		}
		out <- r
	}()
	var id a2a.TaskID
	select {
	case id = <-asked:
	case r := <-out:
		t.Fatalf("the stream ended before the question: %v %v", r.states, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no question within 30s")
	}

	qs := questions(t, s, nil)
	if len(qs) != 1 {
		t.Fatalf("questions = %+v, want one", qs)
	}
	q := qs[0]
	if q.TaskID != string(id) || q.ContextID == "" || q.Text != "Which color?" || q.AgentPath != "0.1" || q.Handle == "" || q.Handle == string(id) ||
		strings.Join(q.Choices, ",") != "red,blue" || q.Tool != "" || q.Caller != "token:flood" || q.Since.IsZero() || q.Deadline != nil {
		t.Fatalf("question = %+v", q)
	}
	if qs := questions(t, s, map[string]any{"task_id": string(id)}); len(qs) != 1 {
		t.Fatalf("questions of the task = %+v", qs)
	}
	if qs := questions(t, s, map[string]any{"task_id": "no-such-task"}); len(qs) != 0 {
		t.Fatalf("questions of an unknown task = %+v", qs)
	}

	var before wireTask
	if e := rpcAs(t, s.service, floodToken, "tasks/get", map[string]any{"id": id}, &before); e != nil {
		t.Fatal(e)
	}
	for _, bad := range []struct {
		token  string
		method string
		params map[string]any
		code   int
		says   string
	}{
		{floodToken, api.OpQuestions, nil, -32601, ""},
		{floodToken, api.OpAnswer, map[string]any{"task_id": id, "answer": "red"}, -32601, ""},
		{opToken, api.OpAnswer, map[string]any{"task_id": id, "answer": ""}, -32602, "no text"},
		{opToken, api.OpAnswer, map[string]any{"task_id": id, "answer": strings.Repeat("r", api.MaxAnswer+1)}, -32602, "over the limit"},
		{opToken, api.OpAnswer, map[string]any{"answer": "red"}, -32602, "task_id is required"},
		{opToken, api.OpAnswer, map[string]any{"task_id": id, "answer": "red", "bogus": 1}, -32602, "bogus"},
		{opToken, api.OpAnswer, map[string]any{"task_id": "no-such-task", "answer": "red"}, -32001, ""},
	} {
		e := rpcAs(t, s.service, bad.token, bad.method, bad.params, nil)
		if e == nil || e.Code != bad.code || !strings.Contains(e.Message+string(e.Data), bad.says) {
			t.Errorf("%s %v: %+v, want %d %q", bad.method, bad.params["task_id"], e, bad.code, bad.says)
		}
	}
	var after wireTask
	rpcAs(t, s.service, floodToken, "tasks/get", map[string]any{"id": id}, &after)
	if after.Status.State != "input-required" || len(after.History) != len(before.History) || len(questions(t, s, nil)) != 1 {
		t.Fatalf("after the refused calls: %s with %d history messages, want input-required with %d", after.Status.State, len(after.History), len(before.History))
	}

	var ans api.AnswerResult
	s.call(opToken, api.OpAnswer, map[string]any{"task_id": id, "answer": "blue"}, &ans)
	if ans.TaskID != string(id) || ans.State != "working" || ans.AnsweredBy != "token:admin" {
		t.Fatalf("a2a.Answer = %+v, want the task working, answered by token:admin", ans)
	}
	var r streamed
	select {
	case r = <-out:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end within 30s of the answer")
	}
	i := slices.Index(r.states, a2a.TaskStateInputRequired)
	if r.err != nil || i < 0 || i+1 >= len(r.states) || r.states[i+1] != a2a.TaskStateWorking || r.states[len(r.states)-1] != a2a.TaskStateCompleted {
		t.Fatalf("the caller's stream: %v %v, want input-required, working, ..., completed", r.states, r.err)
	}
	done, err := c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got := artifactText(done); got != "root: child got blue" {
		t.Fatalf("artifact = %q", got)
	}
	answer := done.History[len(done.History)-1]
	if answer.Role != a2a.MessageRoleUser || answer.Parts[0].(a2a.TextPart).Text != "blue" || answer.Metadata[api.MetaAnsweredBy] != "token:admin" {
		t.Fatalf("the history's last message %+v, want the answer naming token:admin", answer)
	}
	if e := rpcAs(t, s.service, opToken, api.OpAnswer, map[string]any{"task_id": id, "answer": "red"}, nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message+string(e.Data), "not waiting") {
		t.Fatalf("an answer to the finished task: %+v, want -32602 not waiting", e)
	}
	if qs := questions(t, s, nil); len(qs) != 0 {
		t.Fatalf("questions after the answer: %+v", qs)
	}

	var audit api.AuditResult
	s.call(opToken, api.OpAudit, map[string]any{"method": api.OpAnswer}, &audit)
	var ok, refused int
	for _, rec := range audit.Records {
		if rec.Caller != "token:admin" {
			t.Errorf("audit record of another caller: %+v", rec)
		}
		switch {
		case rec.Outcome == "ok" && rec.Target == string(id) && strings.Contains(rec.Detail, `"blue"`):
			ok++
		case rec.Outcome == "error":
			refused++
		}
	}
	if ok != 1 || refused != 6 {
		t.Fatalf("audit of a2a.Answer: %d ok, %d refused, want 1 and 6 (the non-operator's calls are not stored): %+v", ok, refused, audit.Records)
	}
}

// Approvals decided by an operator with `agentd ctl` against a real serve,
// the caller never answering: ctl questions shows the call and its
// arguments, ctl approve runs it, ctl deny refuses it with the reason the
// model sees; ctl answer answers a question.
func TestCtlDecidesApprovals(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\ncall subagent.exec {\"argv\":[\"echo\",\"gated-hello\"]}\nanswer \"{transcript}\"\n")
	s := startAdmService(t, "--intelligence", "builtin:script="+script, "--allow-exec", "--approve", "exec", "--input-timeout", "10m")
	tokenFile := filepath.Join(t.TempDir(), "op-token")
	if err := os.WriteFile(tokenFile, []byte(opToken), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) string {
		t.Helper()
		out, err := agentdCommand(t, append([]string{"ctl"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	opts := []string{"--to", s.url, "--token-file", tokenFile}
	start := func() string {
		t.Helper()
		var task wireTask
		if e := rpcAs(t, s.service, floodToken, "message/send", sendParams("run it", false), &task); e != nil {
			t.Fatalf("send: %+v", e)
		}
		testkit.WaitFor(t, 20*time.Second, "the task input-required", func() bool { return s.stateOf(floodToken, task.ID) == "input-required" })
		return task.ID
	}
	final := func(id string) string {
		t.Helper()
		testkit.WaitFor(t, 20*time.Second, "the task completed", func() bool { return s.stateOf(floodToken, id) == "completed" })
		var task wireTask
		rpcAs(t, s.service, floodToken, "tasks/get", map[string]any{"id": id}, &task)
		b, _ := json.Marshal(task.Artifacts)
		return string(b)
	}

	if out := ctl(append([]string{"questions"}, opts...)...); !strings.Contains(out, "no questions waiting") {
		t.Fatalf("ctl questions with none: %s", out)
	}
	yes := start()
	out := ctl(append([]string{"questions"}, opts...)...)
	for _, want := range []string{yes, "asked by 0 ", "of token:flood", "fails in ", "approval: subagent.exec {\"argv\":[\"echo\",\"gated-hello\"]}", "agentd ctl approve " + yes} {
		if !strings.Contains(out, want) {
			t.Fatalf("ctl questions lacks %q:\n%s", want, out)
		}
	}
	if out := ctl(append(append([]string{"a2a.Questions"}, opts...), "--task", "other")...); !strings.Contains(out, "no questions waiting") {
		t.Fatalf("ctl a2a.Questions --task other: %s", out)
	}
	if out := ctl(append(append([]string{"approve"}, opts...), yes)...); !strings.Contains(out, "state: working") || !strings.Contains(out, "answered_by: token:admin") {
		t.Fatalf("ctl approve: %s", out)
	}
	if got := final(yes); !strings.Contains(got, "gated-hello") || strings.Contains(got, "was not run") {
		t.Fatalf("approved: %s, want the command's output", got)
	}

	no := start()
	ctl(append(append([]string{"deny"}, opts...), no, "not", "today")...)
	if got := final(no); !strings.Contains(got, `answered \"no: not today\"`) || strings.Contains(got, "gated-hello") {
		t.Fatalf("denied: %s, want the refusal with the reason", got)
	}

	// An answer to a task no longer waiting: a clear error, exit non-zero.
	b, err := agentdCommand(t, append(append([]string{"ctl", "answer"}, opts...), no, "yes")...).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "not waiting for an answer") {
		t.Fatalf("ctl answer to a finished task: %v\n%s", err, b)
	}

	third := start()
	ctl(append(append([]string{"answer"}, opts...), third, "YES")...)
	if got := final(third); !strings.Contains(got, "gated-hello") {
		t.Fatalf("ctl answer YES: %s, want the command run", got)
	}
}
