package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/api"
)

// askingExec asks its caller an approval's question, as a2abind does, and
// ends with the answer it gets as its artifact.
func askingExec() fakeExec {
	return fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: "Run it?"})
		msg.Metadata = map[string]any{api.MetaAskPath: "0.1", api.MetaAskChoices: []any{"yes", "no"},
			api.MetaAskTool: api.ToolExec, api.MetaAskArguments: map[string]any{"argv": []any{"echo", "hi"}}}
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateInputRequired, msg)); err != nil {
			return err
		}
		m, err := q.(Answers).AwaitAnswer(ctx)
		if err != nil {
			return err
		}
		art := a2a.NewArtifactEvent(reqCtx, a2a.TextPart{Text: "got " + messageText(m)})
		if err := q.Write(ctx, art); err != nil {
			return err
		}
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}
}

// The engine lists the question a task waits on (text, asker, choices, the
// approval's tool and arguments, since when); bad answers change nothing;
// AnswerAs answers it as the caller's answer would, naming who answered,
// and the task goes on; a task that no longer waits is refused.
func TestEngineQuestionsAndAnswerAs(t *testing.T) {
	e := NewEngine(NewMemoryStore(10, time.Hour), askingExec(), nil)
	ctx := context.Background()
	if qs := e.Questions(""); len(qs) != 0 {
		t.Fatalf("questions before any task: %+v", qs)
	}
	task := a2atest.Send(t, e, a2atest.Msg("go"))
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("task %s, want input-required", task.Status.State)
	}
	qs := e.Questions("")
	if len(qs) != 1 {
		t.Fatalf("questions = %+v, want one", qs)
	}
	q := qs[0]
	if q.TaskID != string(task.ID) || q.ContextID != task.ContextID || q.Text != "Run it?" || q.AgentPath != "0.1" ||
		strings.Join(q.Choices, ",") != "yes,no" || q.Tool != api.ToolExec || string(q.Arguments) != `{"argv":["echo","hi"]}` ||
		q.Caller != "anonymous" || q.Since.IsZero() {
		t.Fatalf("question = %+v", q)
	}
	if qs := e.Questions(task.ID); len(qs) != 1 {
		t.Fatalf("questions of the task = %+v", qs)
	}
	if qs := e.Questions("nope"); len(qs) != 0 {
		t.Fatalf("questions of another task = %+v", qs)
	}

	for _, bad := range []struct{ id, answer string }{
		{string(task.ID), ""},
		{string(task.ID), "  \n"},
		{string(task.ID), strings.Repeat("n", api.MaxAnswer+1)},
		{"", "yes"},
	} {
		if _, err := e.AnswerAs(ctx, a2a.TaskID(bad.id), bad.answer, "token:ops"); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("answer %q (%d bytes): %v, want invalid params", bad.id, len(bad.answer), err)
		}
	}
	if _, err := e.AnswerAs(ctx, "no-such-task", "yes", "token:ops"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("answer to an unknown task: %v, want task not found", err)
	}
	got, _ := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if got.Status.State != a2a.TaskStateInputRequired || len(got.History) != len(task.History) || len(e.Questions("")) != 1 {
		t.Fatalf("after the bad answers: %s, %d history messages (want input-required, %d)", got.Status.State, len(got.History), len(task.History))
	}

	after, err := e.AnswerAs(ctx, task.ID, "yes", "token:ops")
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.State != a2a.TaskStateWorking && !after.Status.State.Terminal() {
		t.Fatalf("after the answer: %s", after.Status.State)
	}
	done := a2atest.WaitTerminal(t, e, task.ID)
	if a2atest.ArtifactText(done) != "got yes" {
		t.Fatalf("the executor got %q, want the operator's answer", a2atest.ArtifactText(done))
	}
	n := len(done.History)
	if n < 3 || messageText(done.History[n-2]) != "Run it?" || messageText(done.History[n-1]) != "yes" ||
		done.History[n-1].Role != a2a.MessageRoleUser || done.History[n-1].Metadata[api.MetaAnsweredBy] != "token:ops" {
		t.Fatalf("history %+v, want the question then the answer naming its operator", done.History)
	}
	if len(e.Questions("")) != 0 {
		t.Fatalf("questions after the answer: %+v", e.Questions(""))
	}
	if _, err := e.AnswerAs(ctx, task.ID, "yes", "token:ops"); !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "not waiting") {
		t.Fatalf("an answer to a finished task: %v, want invalid params: not waiting", err)
	}
}
