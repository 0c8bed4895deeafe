package a2a

import (
	"container/list"
	"errors"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// ErrStoreFull refuses a new task when every slot holds a task still running.
var ErrStoreFull = errors.New("a2a: task store is full of running tasks")

// Store is agentd's task store: bounded by a capacity, with finished tasks kept
// for a retention window and evicted oldest first. It stores immutable task
// snapshots by pointer: a stored *a2a.Task is never modified, so readers share
// it without a copy, and writers replace it with a new snapshot. It is safe for
// concurrent use; create it with NewStore.
type Store struct {
	mu        sync.Mutex // guards tasks, finished
	tasks     map[a2a.TaskID]*storedTask
	finished  list.List // *storedTask, oldest finish first
	capacity  int
	retention time.Duration
	now       func() time.Time
}

type storedTask struct {
	task     *a2a.Task
	finished time.Time
	elem     *list.Element // in Store.finished once terminal
}

// NewStore returns a store holding at most capacity tasks, keeping finished ones
// for retention (0 keeps them until capacity pushes them out).
func NewStore(capacity int, retention time.Duration) *Store {
	if capacity <= 0 {
		capacity = 10000
	}
	return &Store{tasks: make(map[a2a.TaskID]*storedTask), capacity: capacity, retention: retention, now: time.Now}
}

// Put stores a snapshot, replacing the previous one for its id. The caller must
// not modify t afterwards. A new task is refused with ErrStoreFull when the
// store is at capacity and nothing finished can be evicted.
func (s *Store) Put(t *a2a.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expireLocked(now)
	st, ok := s.tasks[t.ID]
	if !ok {
		if len(s.tasks) >= s.capacity && !s.evictOldestLocked() {
			return ErrStoreFull
		}
		st = &storedTask{}
		s.tasks[t.ID] = st
	}
	st.task = t
	if t.Status.State.Terminal() && st.elem == nil {
		st.finished = now
		st.elem = s.finished.PushBack(st)
	}
	return nil
}

// Get returns the current snapshot; the caller must not modify it.
func (s *Store) Get(id a2a.TaskID) (*a2a.Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.tasks[id]
	if !ok {
		return nil, false
	}
	return st.task, true
}

// Len returns the number of stored tasks.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tasks)
}

func (s *Store) evictOldestLocked() bool {
	front := s.finished.Front()
	if front == nil {
		return false
	}
	st := front.Value.(*storedTask)
	s.finished.Remove(front)
	delete(s.tasks, st.task.ID)
	return true
}

func (s *Store) expireLocked(now time.Time) {
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
