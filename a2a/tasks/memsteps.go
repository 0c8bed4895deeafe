package tasks

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

var _ StepStore = (*MemoryStore)(nil)

// stepLog is one task's steps in a MemoryStore.
type stepLog struct {
	recs    []StepRecord
	bytes   int64
	dropped bool // the StepDropped marker is in recs
}

// add appends recs within budget bytes (StepStore.AddSteps).
func (l *stepLog) add(recs []StepRecord, budget int64) {
	for _, r := range recs {
		if l.dropped {
			return
		}
		body := r.Body
		kind := r.Kind
		if l.bytes+int64(len(body)) > budget {
			kind, body = api.StepDropped, DroppedStep
			l.dropped = true
		}
		l.recs = append(l.recs, StepRecord{Seq: int64(len(l.recs)) + 1, Kind: kind, Body: append([]byte(nil), body...)})
		l.bytes += int64(len(body))
	}
}

// DroppedStep is the body of the api.StepDropped marker every store keeps
// where a tree's step budget ran out.
var DroppedStep = []byte(`{"kind":"dropped"}`)

// AddSteps implements StepStore.
func (s *MemoryStore) AddSteps(_ context.Context, root a2a.TaskID, recs []StepRecord, budget int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.tasks[root]
	if !ok {
		return nil
	}
	st.steps.add(recs, budget)
	return nil
}

// Steps implements StepStore.
func (s *MemoryStore) Steps(_ context.Context, root a2a.TaskID, after int64, limit int) ([]StepRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(s.now())
	st, ok := s.tasks[root]
	if !ok || after < 0 || after >= int64(len(st.steps.recs)) || limit <= 0 {
		return nil, nil
	}
	recs := st.steps.recs[after:]
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return append([]StepRecord(nil), recs...), nil
}
