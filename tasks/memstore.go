package tasks

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
)

// MemoryStore is the Store in memory: bounded by a capacity, with finished
// tasks kept for a retention window and evicted oldest first. It keeps the
// snapshots it is given by pointer and hands them out without a copy. It never
// blocks on I/O and never fails but as the Store documents. It is safe for
// concurrent use; create it with NewMemoryStore.
type MemoryStore struct {
	mu        sync.Mutex // guards tasks, finished, messages
	tasks     map[a2a.TaskID]*storedTask
	messages  map[messageKey]a2a.TaskID // idempotency keys of the stored tasks
	finished  list.List                 // *storedTask, oldest finish first
	capacity  int
	retention time.Duration
	now       func() time.Time
}

var _ Store = (*MemoryStore)(nil)

// messageKey is a caller's message id: a task's idempotency key.
type messageKey struct{ owner, id string }

type storedTask struct {
	task     *a2a.Task
	owner    string // the authenticated caller that created it; "" for none
	finished time.Time
	elem     *list.Element // in MemoryStore.finished once terminal
	push     []PushTarget  // webhooks, in registration order
}

// NewMemoryStore returns a store holding at most capacity tasks (10000 when
// capacity <= 0), keeping finished ones for retention (0 keeps them until
// capacity pushes them out). A new task is refused with ErrStoreFull when the
// store is at capacity and nothing finished can be evicted.
func NewMemoryStore(capacity int, retention time.Duration) *MemoryStore {
	if capacity <= 0 {
		capacity = 10000
	}
	return &MemoryStore{tasks: make(map[a2a.TaskID]*storedTask), messages: make(map[messageKey]a2a.TaskID), capacity: capacity, retention: retention, now: time.Now}
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, t *a2a.Task, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expireLocked(now)
	if _, ok := s.tasks[t.ID]; ok {
		return fmt.Errorf("tasks: task %s already exists", t.ID)
	}
	key := messageKey{owner, MessageKey(t)}
	if id, ok := s.messages[key]; ok && key.id != "" {
		return &DuplicateError{Existing: id, MessageID: key.id}
	}
	if len(s.tasks) >= s.capacity && !s.evictOldestLocked() {
		return ErrStoreFull
	}
	st := &storedTask{owner: owner}
	s.tasks[t.ID] = st
	if key.id != "" {
		s.messages[key] = t.ID
	}
	s.setLocked(st, t, now)
	return nil
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, t *a2a.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expireLocked(now)
	st, err := s.taskLocked(t.ID)
	if err != nil {
		return err
	}
	s.setLocked(st, t, now)
	return nil
}

// setLocked makes t the task's snapshot; a task that turns terminal joins the
// eviction order.
func (s *MemoryStore) setLocked(st *storedTask, t *a2a.Task, now time.Time) {
	st.task = t
	if t.Status.State.Terminal() && st.elem == nil {
		st.finished = now
		st.elem = s.finished.PushBack(st)
	}
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id a2a.TaskID) (*a2a.Task, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return nil, "", err
	}
	return st.task, st.owner, nil
}

// Len returns the number of stored tasks.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}

// CountByState implements Store. It takes the lock once and walks every
// task: a scrape's cost, not a request's.
func (s *MemoryStore) CountByState(context.Context) (map[a2a.TaskState]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[a2a.TaskState]int)
	for _, st := range s.tasks {
		out[st.task.Status.State]++
	}
	return out, nil
}

func (s *MemoryStore) evictOldestLocked() bool {
	front := s.finished.Front()
	if front == nil {
		return false
	}
	st := front.Value.(*storedTask)
	s.finished.Remove(front)
	delete(s.tasks, st.task.ID)
	delete(s.messages, messageKey{st.owner, MessageKey(st.task)})
	return true
}

func (s *MemoryStore) expireLocked(now time.Time) {
	if s.retention <= 0 {
		return
	}
	for {
		front := s.finished.Front()
		if front == nil || now.Sub(front.Value.(*storedTask).finished) < s.retention {
			return
		}
		s.evictOldestLocked()
	}
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, q ListQuery) (ListPage, error) {
	size := q.PageSize
	var after *cursor
	if q.PageToken != "" {
		c, err := parseCursor(q.PageToken)
		if err != nil {
			return ListPage{}, err
		}
		after = &c
	}
	s.mu.Lock()
	s.expireLocked(s.now())
	matched := make([]*a2a.Task, 0, min(len(s.tasks), 256))
	for _, st := range s.tasks {
		t := st.task
		if (!q.AnyOwner && st.owner != q.Owner) ||
			(q.ContextID != "" && t.ContextID != q.ContextID) ||
			(q.State != "" && t.Status.State != q.State) ||
			(!q.UpdatedAfter.IsZero() && stamp(t).Before(q.UpdatedAfter)) {
			continue
		}
		matched = append(matched, t)
	}
	s.mu.Unlock()
	slices.SortFunc(matched, func(a, b *a2a.Task) int {
		if c := stamp(b).Compare(stamp(a)); c != 0 {
			return c
		}
		return strings.Compare(string(b.ID), string(a.ID))
	})
	start := 0
	if after != nil {
		start = len(matched)
		for i, t := range matched {
			if after.before(t) {
				start = i
				break
			}
		}
	}
	end := min(start+size, len(matched))
	page := ListPage{Tasks: matched[start:end], PageSize: size, TotalSize: len(matched)}
	for i, t := range page.Tasks {
		page.Tasks[i] = trimHistory(t, q.HistoryLength)
	}
	if end < len(matched) {
		last := matched[end-1]
		page.NextPageToken = cursor{at: stamp(last), id: string(last.ID)}.String()
	}
	return page, nil
}

func (s *MemoryStore) taskLocked(id a2a.TaskID) (*storedTask, error) {
	st, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
	}
	return st, nil
}

// SetPush implements Store.
func (s *MemoryStore) SetPush(_ context.Context, id a2a.TaskID, target PushTarget) (PushTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return PushTarget{}, err
	}
	if target.Config.ID == "" {
		target.Config.ID = uuid.NewString()
	}
	for i, p := range st.push {
		if p.Config.ID == target.Config.ID {
			st.push = slices.Clone(st.push)
			st.push[i] = target
			return target, nil
		}
	}
	if len(st.push) >= MaxPushConfigs {
		return PushTarget{}, fmt.Errorf("task %s already has %d push notification configs: %w", id, MaxPushConfigs, a2a.ErrInvalidParams)
	}
	st.push = append(slices.Clip(st.push), target)
	return target, nil
}

// GetPush implements Store.
func (s *MemoryStore) GetPush(_ context.Context, id a2a.TaskID, configID string) (PushTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return PushTarget{}, err
	}
	if configID == "" && len(st.push) > 0 {
		return st.push[len(st.push)-1], nil
	}
	for _, p := range st.push {
		if p.Config.ID == configID {
			return p, nil
		}
	}
	return PushTarget{}, fmt.Errorf("%w: task %s has no push notification config %q", a2a.ErrTaskNotFound, id, configID)
}

// ListPush implements Store; the slice is shared.
func (s *MemoryStore) ListPush(_ context.Context, id a2a.TaskID) ([]PushTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return nil, err
	}
	return st.push, nil
}

// DeletePush implements Store.
func (s *MemoryStore) DeletePush(_ context.Context, id a2a.TaskID, configID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return err
	}
	st.push = slices.DeleteFunc(slices.Clone(st.push), func(p PushTarget) bool { return p.Config.ID == configID })
	return nil
}
