package tasks

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

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

// streamedText folds the artifact updates of one artifact as a client
// would: a piece without append starts the text over, one with append adds
// to it. It returns the text, the pieces and whether the last one was
// marked lastChunk.
func streamedText(evs []a2a.Event, id a2a.ArtifactID) (text string, pieces []string, last bool) {
	for _, ev := range evs {
		au, ok := ev.(*a2a.TaskArtifactUpdateEvent)
		if !ok || au.Artifact.ID != id {
			continue
		}
		var s string
		for _, p := range au.Artifact.Parts {
			s += p.(a2a.TextPart).Text
		}
		if !au.Append {
			text = ""
			s = "=" + s // marks a piece that starts over
		}
		text += strings.TrimPrefix(s, "=")
		pieces = append(pieces, s)
		last = au.LastChunk
	}
	return text, pieces, last
}

// TestStreamedArtifact: pieces streamed to a task reach its streaming
// clients (the first starting the artifact, the others appended) and are
// never stored: tasks/get during the stream shows no artifact, and after it
// the one artifact, whole, in one part. The whole artifact written at the
// end reaches a client that saw every piece as the rest appended with
// lastChunk; a client that subscribed mid-stream gets the text so far in
// place of its first piece, and the same end; when the whole is not the
// pieces continued, the client is shown the whole.
func TestStreamedArtifact(t *testing.T) {
	for _, tc := range []struct {
		name, whole string
		wantPieces  []string
		wantLate    []string
	}{
		{"continued", "Hello, world!", []string{"=Hel", "lo, ", "world", "!"}, []string{"=Hello, world", "!"}},
		{"replaced", "Bonjour", []string{"=Hel", "lo, ", "world", "=Bonjour"}, []string{"=Hello, world", "=Bonjour"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *Engine
			step := make(chan struct{})
			artID := a2a.ArtifactID("a1")
			piece := func(q eventqueue.Queue, id a2a.TaskID, s string, appended bool) {
				err := e.Stream(context.Background(), id, &a2a.TaskArtifactUpdateEvent{TaskID: id, Append: appended,
					Artifact: &a2a.Artifact{ID: artID, Parts: a2a.ContentParts{a2a.TextPart{Text: s}}}})
				if err != nil {
					t.Error(err)
				}
			}
			e = NewEngine(NewMemoryStore(10, time.Hour), fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
				q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
				piece(q, reqCtx.TaskID, "Hel", false)
				piece(q, reqCtx.TaskID, "lo, ", true)
				step <- struct{}{} // the test reads the task, subscribes again
				<-step
				piece(q, reqCtx.TaskID, "world", true)
				art := &a2a.Artifact{ID: artID, Name: "distillate", Parts: a2a.ContentParts{a2a.TextPart{Text: tc.whole}}}
				q.Write(ctx, &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Artifact: art, LastChunk: true})
				ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
				ev.Final = true
				return q.Write(ctx, ev)
			}}, nil)
			ctx := context.Background()
			var first, late []a2a.Event
			done := make(chan struct{})
			idCh := make(chan a2a.TaskID, 1)
			go func() {
				defer close(done)
				for ev, err := range e.OnSendMessageStream(ctx, a2atest.Msg("go")) {
					if err != nil {
						t.Error(err)
						return
					}
					if task, ok := ev.(*a2a.Task); ok {
						idCh <- task.ID
					}
					first = append(first, ev)
				}
			}()
			id := <-idCh
			<-step
			mid, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
			if err != nil || len(mid.Artifacts) != 0 {
				t.Fatalf("tasks/get mid-stream: %+v, %v: want no artifact", mid, err)
			}
			lateDone := make(chan struct{})
			subscribed := make(chan struct{})
			go func() {
				defer close(lateDone)
				for ev, err := range e.OnResubscribeToTask(ctx, &a2a.TaskIDParams{ID: id}) {
					if err != nil {
						t.Error(err)
						return
					}
					if _, ok := ev.(*a2a.Task); ok {
						close(subscribed)
					}
					late = append(late, ev)
				}
			}()
			<-subscribed
			step <- struct{}{}
			<-done
			<-lateDone
			for name, evs := range map[string][]a2a.Event{"first": first, "late": late} {
				text, pieces, last := streamedText(evs, artID)
				want := tc.wantPieces
				if name == "late" {
					want = tc.wantLate
				}
				if text != tc.whole || !slices.Equal(pieces, want) || !last {
					t.Errorf("%s client: text %q, pieces %q (last %v), want %q, pieces %q, last", name, text, pieces, last, tc.whole, want)
				}
				if s, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent); !ok || s.Status.State != a2a.TaskStateCompleted {
					t.Errorf("%s client: last event %T, want the final status", name, evs[len(evs)-1])
				}
			}
			final, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
			if err != nil || len(final.Artifacts) != 1 || len(final.Artifacts[0].Parts) != 1 || final.Artifacts[0].Parts[0].(a2a.TextPart).Text != tc.whole {
				t.Fatalf("tasks/get at the end: %+v, %v: want the one whole artifact", final, err)
			}
			if err := e.Stream(ctx, id, &a2a.TaskArtifactUpdateEvent{TaskID: id, Artifact: &a2a.Artifact{ID: artID}}); err == nil {
				t.Error("a piece streamed to an ended task was taken")
			}
		})
	}
}

// TestApplyAppendsTextToText: an artifact update appending text to an
// artifact whose last part is text continues that part (a streamed answer
// folded by Apply, as a peer's stream is, is one whole text part); other
// parts are added as they are; the task applied to is not changed.
func TestApplyAppendsTextToText(t *testing.T) {
	art := func(parts ...a2a.Part) *a2a.Artifact { return &a2a.Artifact{ID: "a", Parts: parts} }
	task := &a2a.Task{ID: "t"}
	for i, ev := range []*a2a.TaskArtifactUpdateEvent{
		{TaskID: "t", Artifact: art(a2a.TextPart{Text: "The "})},
		{TaskID: "t", Append: true, Artifact: art(a2a.TextPart{Text: "whole "})},
		{TaskID: "t", Append: true, Artifact: art(a2a.TextPart{Text: "answer"}, a2a.DataPart{Data: map[string]any{"k": 1.0}})},
		{TaskID: "t", Append: true, Artifact: art(a2a.TextPart{Text: "."})},
	} {
		before := task
		next, err := Apply(task, ev)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && before.Artifacts[0].Parts[0].(a2a.TextPart).Text != "The " {
			t.Fatal("Apply changed the task it was given")
		}
		task = next
	}
	parts := task.Artifacts[0].Parts
	if len(task.Artifacts) != 1 || len(parts) != 3 || parts[0].(a2a.TextPart).Text != "The whole answer" ||
		parts[2].(a2a.TextPart).Text != "." {
		t.Fatalf("artifact %+v", task.Artifacts[0])
	}
}

// TestStreamEndsWithAWholeArtifact: a stream ended with a whole artifact
// that is not text (a child's JSON answer, shown in its root's stream) is
// shown whole, and the stream is forgotten; a piece that is not text is
// refused.
func TestStreamEndsWithAWholeArtifact(t *testing.T) {
	e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{}, nil)
	ctx := context.Background()
	task := &a2a.Task{ID: "n1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if err := e.OpenTask(ctx, task, "n1"); err != nil {
		t.Fatal(err)
	}
	var got []a2a.Event
	subscribed, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range e.OnResubscribeToTask(ctx, &a2a.TaskIDParams{ID: "n1"}) {
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := ev.(*a2a.Task); ok {
				close(subscribed)
				continue
			}
			got = append(got, ev)
		}
	}()
	<-subscribed
	art := func(parts ...a2a.Part) *a2a.Artifact { return &a2a.Artifact{ID: "child.distillate", Parts: parts} }
	if err := e.Stream(ctx, "n1", &a2a.TaskArtifactUpdateEvent{TaskID: "n1", Artifact: art(a2a.TextPart{Text: `{"a":`})}); err != nil {
		t.Fatal(err)
	}
	if err := e.Stream(ctx, "n1", &a2a.TaskArtifactUpdateEvent{TaskID: "n1", Append: true, Artifact: art(a2a.DataPart{Data: map[string]any{}})}); err == nil {
		t.Error("a piece that is not text was taken")
	}
	whole := &a2a.TaskArtifactUpdateEvent{TaskID: "n1", LastChunk: true, Artifact: art(a2a.DataPart{Data: map[string]any{"a": 1.0}})}
	if err := e.Stream(ctx, "n1", whole); err != nil {
		t.Fatal(err)
	}
	lt := e.getLive("n1")
	lt.mu.Lock()
	kept := len(lt.streams)
	lt.mu.Unlock()
	if kept != 0 {
		t.Error("the ended stream is still kept")
	}
	end := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	end.Final = true
	if err := e.Update(ctx, "n1", end); err != nil {
		t.Fatal(err)
	}
	<-done
	if len(got) != 3 || got[1] != whole || got[0].(*a2a.TaskArtifactUpdateEvent).ContextID != "c" {
		t.Fatalf("events %+v: want the piece (with the task's context), the whole artifact as written, the end", got)
	}
}
