package tasks

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

// instantExec ends every task at once: working, one artifact, completed.
type instantExec struct{}

func (instantExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
	q.Write(ctx, &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "done"}}}})
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (instantExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// A stream of a new message holds every event of its task, however fast the
// executor: the stream subscribes before the executor starts (before, an
// executor that ended first left the stream its final snapshot alone).
func TestStreamOfAnInstantTaskHasEveryEvent(t *testing.T) {
	e := NewEngine(NewMemoryStore(1000, 0), instantExec{}, nil)
	// The worst order: the executor has ended the task before start returns.
	e.startedHook = func(lt *liveTask) {
		select {
		case <-lt.done:
		case <-time.After(10 * time.Second):
			t.Error("the instant task did not end")
		}
	}
	ctx := context.Background()
	for i := range 20 {
		var kinds []string
		for ev, err := range e.OnSendMessageStream(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}) {
			if err != nil {
				t.Fatal(err)
			}
			switch v := ev.(type) {
			case *a2a.Task:
				kinds = append(kinds, "task:"+string(v.Status.State))
			case *a2a.TaskStatusUpdateEvent:
				kinds = append(kinds, "status:"+string(v.Status.State))
			case *a2a.TaskArtifactUpdateEvent:
				kinds = append(kinds, "artifact")
			}
		}
		if len(kinds) != 4 || kinds[0] != "task:submitted" || kinds[3] != "status:completed" {
			t.Fatalf("stream %d: %v, want the submitted task, working, the artifact, completed", i, kinds)
		}
	}
}
