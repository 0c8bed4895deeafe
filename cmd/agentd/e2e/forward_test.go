package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.5: a follow-up message naming a task that another replica runs is
// forwarded to the runner through PostgreSQL and answered as the runner
// would answer it, on both protocol versions.
func TestReplicasForwardFollowUp(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 1500ms\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	ca, cb := a.client(t), b.client(t)
	ctx := context.Background()

	start := func(text string) *a2a.Task {
		t.Helper()
		res, err := ca.SendMessage(ctx, nonBlocking(textMessage(text)))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		testkit.WaitFor(t, 10*time.Second, "the task running on A", func() bool { return getTask(t, b, task.ID).Status.State == a2a.TaskStateWorking })
		return task
	}

	// 0.3, blocking: B forwards the follow-up to A, which runs it as the
	// task's next turn; B answers with the task once it completes.
	first := start("first")
	res, err := cb.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, first, a2a.TextPart{Text: "second"})})
	if err != nil {
		t.Fatalf("a follow-up through B: %v", err)
	}
	done := res.(*a2a.Task)
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(done), "done: second") {
		t.Fatalf("after the follow-up through B: %s %q", done.Status.State, artifactText(done))
	}
	if lineCount(b, "follow-up forwarded to the task's replica") != 1 || lineCount(a, "forwarded follow-up taken") != 1 {
		t.Fatalf("the follow-up did not go through A")
	}

	// 1.0, non-blocking: answered at once with the task, the follow-up in
	// its history.
	second := start("third")
	var got struct {
		Task struct {
			ID      string                 `json:"id"`
			Status  struct{ State string } `json:"status"`
			History []struct {
				MessageID string `json:"messageId"`
			} `json:"history"`
		} `json:"task"`
	}
	params := fmt.Sprintf(`{"message":{"messageId":"fwd10","role":"ROLE_USER","taskId":%q,"parts":[{"text":"fourth"}]},"configuration":{"returnImmediately":true}}`, second.ID)
	sent := time.Now()
	if e := rpc(t, b, "1.0", "SendMessage", params, &got); e != nil {
		t.Fatalf("SendMessage (1.0) through B: %+v", e)
	}
	t.Logf("a non-blocking follow-up forwarded through B and taken by A: answered in %s", time.Since(sent))
	if got.Task.ID != string(second.ID) || got.Task.Status.State != "TASK_STATE_WORKING" || len(got.Task.History) == 0 || got.Task.History[len(got.Task.History)-1].MessageID != "fwd10" {
		t.Fatalf("the 1.0 follow-up through B: %+v", got.Task)
	}
	var final *a2a.Task
	testkit.WaitFor(t, 15*time.Second, "the task completed with the 1.0 follow-up", func() bool {
		final = getTask(t, b, second.ID)
		return final.Status.State.Terminal()
	})
	if final.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(final), "done: fourth") {
		t.Fatalf("after the 1.0 follow-up: %s %q", final.Status.State, artifactText(final))
	}
}

// A follow-up streamed through the replica that does not run the task: the
// stream shows the task with the follow-up, then follows it to its end.
func TestReplicasForwardStreamedFollowUp(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 1500ms\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	ctx := context.Background()
	res, err := a.client(t).SendMessage(ctx, nonBlocking(textMessage("first")))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	testkit.WaitFor(t, 10*time.Second, "the task running on A", func() bool { return getTask(t, b, task.ID).Status.State == a2a.TaskStateWorking })
	follow := &a2a.MessageSendParams{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.TextPart{Text: "streamed"})}
	var first *a2a.Task
	var last a2a.TaskState
	for ev, err := range b.client(t).SendStreamingMessage(ctx, follow) {
		if err != nil {
			t.Fatalf("the streamed follow-up through B: %v", err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			if first == nil {
				first = v
			}
			last = v.Status.State
		case *a2a.TaskStatusUpdateEvent:
			last = v.Status.State
		}
	}
	if first == nil || first.History[len(first.History)-1].ID != follow.Message.ID || last != a2a.TaskStateCompleted {
		t.Fatalf("the stream through B: first %+v, last state %s", first, last)
	}
	if done := getTask(t, b, task.ID); !strings.Contains(artifactText(done), "done: streamed") {
		t.Fatalf("after the streamed follow-up: %q", artifactText(done))
	}
}

// An answer to a question is a message naming the task: sent through the
// replica that does not run the task, it reaches the asking subagent on the
// runner; both protocol versions.
func TestReplicasForwardAnswer(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, askScripts[1].script) // a child asks; the root passes it up
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	ca, cb := a.client(t), b.client(t)
	ctx := context.Background()

	// 0.3: asked through A (blocking: the input-required task), answered
	// through B (blocking: the task completed).
	res, err := ca.SendMessage(ctx, textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, "0.1")
	res, err = cb.SendMessage(ctx, answerTo(task, "blue"))
	if err != nil {
		t.Fatalf("the answer through B: %v", err)
	}
	if done := res.(*a2a.Task); done.Status.State != a2a.TaskStateCompleted || artifactText(done) != askScripts[1].want {
		t.Fatalf("after the answer through B: %s %q", done.Status.State, artifactText(done))
	}

	// 1.0: the same, the answer a SendMessage through B.
	res, err = ca.SendMessage(ctx, textMessage("pick again"))
	if err != nil {
		t.Fatal(err)
	}
	task = res.(*a2a.Task)
	questionOf(t, task, "0.1")
	var done struct {
		Task struct {
			Status    struct{ State string } `json:"status"`
			Artifacts []struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	params := fmt.Sprintf(`{"message":{"messageId":"fwd-answer10","role":"ROLE_USER","taskId":%q,"parts":[{"text":"blue"}]}}`, task.ID)
	if e := rpc(t, b, "1.0", "SendMessage", params, &done); e != nil {
		t.Fatalf("SendMessage (1.0, the answer) through B: %+v", e)
	}
	if done.Task.Status.State != "TASK_STATE_COMPLETED" || len(done.Task.Artifacts) != 1 || done.Task.Artifacts[0].Parts[0].Text != askScripts[1].want {
		t.Fatalf("after the 1.0 answer through B: %+v", done.Task)
	}

	// An empty answer is refused by A's answer path, through B: the task
	// still waits for its answer.
	res, err = ca.SendMessage(ctx, textMessage("pick once more"))
	if err != nil {
		t.Fatal(err)
	}
	task = res.(*a2a.Task)
	params = fmt.Sprintf(`{"message":{"messageId":"fwd-empty","role":"user","taskId":%q,"parts":[{"kind":"text","text":"  "}]}}`, task.ID)
	if e := rpc(t, b, "", "message/send", params, nil); e == nil || e.Code != -32602 || !strings.Contains(string(e.Data), "the answer has no text") {
		t.Fatalf("an empty answer through B: %+v, want -32602 with A's reason", e)
	}
	if got := getTask(t, b, task.ID); got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("after the refused answer: %s, want still input-required", got.Status.State)
	}

	// B's operator sees the question A's task waits on (a2a.Questions reads
	// the store's input-required tasks), and its answer (a2a.Answer) through
	// B reaches A's task the same way, the operator named in the answer's
	// metadata.
	var listed api.QuestionsResult
	if e := rpc(t, b, "", api.OpQuestions, `{}`, &listed); e != nil {
		t.Fatalf("a2a.Questions through B: %+v", e)
	}
	if len(listed.Questions) != 1 || listed.Questions[0].TaskID != string(task.ID) || listed.Questions[0].AgentPath != "0.1" || listed.Questions[0].Text == "" {
		t.Fatalf("a2a.Questions through B: %+v, want A's task %s asked at 0.1", listed.Questions, task.ID)
	}
	var ans api.AnswerResult
	if e := rpc(t, b, "", api.OpAnswer, fmt.Sprintf(`{"task_id":%q,"answer":"blue"}`, task.ID), &ans); e != nil {
		t.Fatalf("a2a.Answer through B: %+v", e)
	}
	var got *a2a.Task
	testkit.WaitFor(t, 30*time.Second, "the task completed after the operator's answer", func() bool {
		got = getTask(t, b, task.ID)
		return got.Status.State == a2a.TaskStateCompleted
	})
	if artifactText(got) != askScripts[1].want {
		t.Fatalf("after the operator's answer through B: %q", artifactText(got))
	}
	var by any
	for _, m := range got.History {
		if m.Metadata != nil && m.Metadata[api.MetaAnsweredBy] != nil {
			by = m.Metadata[api.MetaAnsweredBy]
		}
	}
	if by == nil {
		t.Fatalf("no message of the history names the operator who answered: %+v", got.History)
	}
}
