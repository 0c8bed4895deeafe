package tasks

import (
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
)

// Streamed artifacts: an artifact's text shown to a task's subscribers as it
// is produced (a model's answer, token by token), before the artifact is
// final. The pieces are fanned out and never applied to the task: they are
// not stored, not pushed to webhooks, and tasks/get never shows them. The
// artifact becomes part of the task when the executor writes it whole, as
// it always did; a subscriber that saw the pieces is then shown that write
// as the rest of the text appended (often nothing) with lastChunk, so that
// the pieces it saw, concatenated, are the artifact's text; one that did not
// see them all (or when the whole is not the pieces' text continued) is
// shown the whole artifact, replacing them.

// artifactStream is the text streamed so far of one artifact of a live
// task.
type artifactStream struct {
	gen  uint64 // which stream of the task this is (liveTask.streamGen)
	text strings.Builder
}

// Stream shows a piece of an artifact's text to the task's subscribers.
// ev.Artifact holds text parts only; with ev.Append unset the piece starts
// the artifact's text over (a new stream), else it continues it. With
// ev.LastChunk set and ev.Append unset, ev is the whole artifact (of any
// parts), ending the stream: shown as the rest of its text appended to a
// subscriber that saw the stream from its start, when it is that text
// continued, else whole (as for an artifact written whole). A
// subscriber that joined after the stream began is shown the text so far,
// as a new artifact, in place of its first piece. The task itself is not
// changed. An empty ev.ContextID is set to the task's. It is an error for a
// task that is not live here.
func (e *Engine) Stream(ctx context.Context, id a2a.TaskID, ev *a2a.TaskArtifactUpdateEvent) error {
	if ev.Artifact == nil || ev.TaskID != id {
		return fmt.Errorf("tasks: bad streamed artifact for task %s", id)
	}
	closing := ev.LastChunk && !ev.Append
	var piece strings.Builder
	for _, p := range ev.Artifact.Parts {
		t, ok := p.(a2a.TextPart)
		if !ok && !closing {
			return fmt.Errorf("tasks: streamed artifact %s of task %s has a %T part", ev.Artifact.ID, id, p)
		}
		piece.WriteString(t.Text)
	}
	lt := e.getLive(id)
	if lt == nil {
		return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.task.Status.State.Terminal() {
		return errTaskFinished
	}
	if ev.ContextID == "" {
		ev.ContextID = lt.task.ContextID
	}
	aid := ev.Artifact.ID
	if closing {
		// The whole artifact, ending the stream.
		for s := range lt.subs {
			lt.sendLocked(s, lt.shownLocked(s, ev))
		}
		delete(lt.streams, aid)
		return nil
	}
	st := lt.streams[aid]
	if st == nil || !ev.Append {
		if lt.streams == nil {
			lt.streams = make(map[a2a.ArtifactID]*artifactStream)
		}
		lt.streamGen++
		st = &artifactStream{gen: lt.streamGen}
		lt.streams[aid] = st
	}
	st.text.WriteString(piece.String())
	for s := range lt.subs {
		shown := ev
		if s.synced[aid] != st.gen {
			// New to this stream: the whole text so far, as a new artifact.
			if s.synced == nil {
				s.synced = make(map[a2a.ArtifactID]uint64)
			}
			s.synced[aid] = st.gen
			art := *ev.Artifact
			art.Parts = a2a.ContentParts{a2a.TextPart{Text: st.text.String()}}
			shown = &a2a.TaskArtifactUpdateEvent{TaskID: ev.TaskID, ContextID: ev.ContextID, Artifact: &art, Metadata: ev.Metadata}
		}
		lt.sendLocked(s, shown)
	}
	return nil
}

// sendLocked sends ev to subscriber s, dropping s when it lags too far.
func (lt *liveTask) sendLocked(s *subscriber, ev a2a.Event) {
	select {
	case s.ch <- ev:
	default:
		s.dropped = true
		close(s.ch)
		delete(lt.subs, s)
	}
}

// shownLocked is the event subscriber s is shown for ev, an event applied to
// the task: ev itself, except for an artifact written whole that s has seen
// streamed, which s is shown as the rest of its text appended.
func (lt *liveTask) shownLocked(s *subscriber, ev a2a.Event) a2a.Event {
	au, ok := ev.(*a2a.TaskArtifactUpdateEvent)
	if !ok || au.Append || au.Artifact == nil {
		return ev
	}
	st := lt.streams[au.Artifact.ID]
	if st == nil || s.synced[au.Artifact.ID] != st.gen {
		return ev
	}
	var whole strings.Builder
	for _, p := range au.Artifact.Parts {
		t, ok := p.(a2a.TextPart)
		if !ok {
			return ev
		}
		whole.WriteString(t.Text)
	}
	rest, ok := strings.CutPrefix(whole.String(), st.text.String())
	if !ok {
		return ev
	}
	art := *au.Artifact
	art.Parts = a2a.ContentParts{a2a.TextPart{Text: rest}}
	return &a2a.TaskArtifactUpdateEvent{TaskID: au.TaskID, ContextID: au.ContextID, Artifact: &art, Append: true, LastChunk: au.LastChunk, Metadata: au.Metadata}
}

// endStreamLocked forgets the stream of an artifact written whole.
func (lt *liveTask) endStreamLocked(ev a2a.Event) {
	if au, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && au.Artifact != nil && !au.Append {
		delete(lt.streams, au.Artifact.ID)
	}
}

// Shower is implemented by the queue an executor writes a task's events to:
// Show shows a piece of the task's artifact to its streaming clients, as
// Engine.Stream does, without storing it (a routed delegation's remote text,
// say, before its result is written whole).
type Shower interface {
	Show(ctx context.Context, ev *a2a.TaskArtifactUpdateEvent) error
}

// Show implements Shower.
func (q queue) Show(ctx context.Context, ev *a2a.TaskArtifactUpdateEvent) error {
	return q.e.Stream(ctx, q.lt.snapshot().ID, ev)
}
