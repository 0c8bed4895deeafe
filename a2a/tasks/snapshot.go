package tasks

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// Apply returns the snapshot after an event: old with ev (a status update, an
// artifact update, or a whole task) applied. A status update moves the old
// status message into the history and merges its metadata into the task's;
// an artifact update adds, appends to or replaces the artifact with its id.
// old is never modified and its slices are never appended to in place, so a
// snapshot stays immutable once stored.
func Apply(old *a2a.Task, ev a2a.Event) (*a2a.Task, error) {
	t := *old
	switch v := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		if v.TaskID != old.ID {
			return nil, fmt.Errorf("tasks: status update for task %s applied to %s", v.TaskID, old.ID)
		}
		if old.Status.Message != nil {
			t.History = append(slices.Clip(old.History), old.Status.Message)
		}
		t.Metadata = mergeMeta(old.Metadata, v.Metadata)
		t.Status = v.Status
		if t.Status.Timestamp == nil {
			t.Status.Timestamp = now()
		}
	case *a2a.TaskArtifactUpdateEvent:
		if v.TaskID != old.ID || v.Artifact == nil {
			return nil, fmt.Errorf("tasks: bad artifact update for task %s", old.ID)
		}
		i := slices.IndexFunc(old.Artifacts, func(a *a2a.Artifact) bool { return a.ID == v.Artifact.ID })
		switch {
		case i < 0:
			t.Artifacts = append(slices.Clip(old.Artifacts), v.Artifact)
		case v.Append:
			// Text appended to text continues its part: a streamed answer
			// folds into one whole text part, not a part per piece.
			merged := *old.Artifacts[i]
			add := v.Artifact.Parts
			if n := len(merged.Parts); n > 0 && len(add) > 0 {
				last, ok1 := merged.Parts[n-1].(a2a.TextPart)
				next, ok2 := add[0].(a2a.TextPart)
				if ok1 && ok2 {
					last.Text += next.Text
					merged.Parts = append(slices.Clone(merged.Parts[:n-1]), last)
					add = add[1:]
				}
			}
			merged.Parts = append(slices.Clip(merged.Parts), add...)
			t.Artifacts = slices.Clone(old.Artifacts)
			t.Artifacts[i] = &merged
		default:
			t.Artifacts = slices.Clone(old.Artifacts)
			t.Artifacts[i] = v.Artifact
		}
	case *a2a.Task:
		if v.ID != old.ID {
			return nil, fmt.Errorf("tasks: task %s applied to %s", v.ID, old.ID)
		}
		t = *v
	default:
		return nil, fmt.Errorf("tasks: unexpected event %T for a task", ev)
	}
	return &t, nil
}

// mergeMeta is old with add's entries over it: old when add is empty, add
// itself when old is (an event's metadata becomes the snapshot's as it is:
// an event written is the engine's, and no one changes it after, since its
// subscribers and webhooks read it meanwhile), else a new map.
func mergeMeta(old, add map[string]any) map[string]any {
	switch {
	case len(add) == 0:
		return old
	case len(old) == 0:
		return add
	}
	m := make(map[string]any, len(old)+len(add))
	maps.Copy(m, old)
	maps.Copy(m, add)
	return m
}

// now is the current time as an A2A status timestamp.
func now() *time.Time {
	t := time.Now().UTC()
	return &t
}
