package tasks

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2atest"
)

// A stream of a new message holds every event of its task, however fast the
// executor: the stream subscribes before the executor starts (before, an
// executor that ended first left the stream its final snapshot alone).
func TestStreamOfAnInstantTaskHasEveryEvent(t *testing.T) {
	e := NewEngine(NewMemoryStore(1000, 0), &a2atest.Executor{}, nil)
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
		for ev, err := range e.OnSendMessageStream(ctx, a2atest.Msg("hi")) {
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
		if len(kinds) < 4 || kinds[0] != "task:submitted" || kinds[len(kinds)-1] != "status:completed" ||
			!slices.Contains(kinds, "status:working") || !slices.Contains(kinds, "artifact") {
			t.Fatalf("stream %d: %v, want the submitted task, working, the artifact, completed", i, kinds)
		}
	}
}
