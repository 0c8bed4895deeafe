package a2a

import (
	"container/list"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
)

// ErrStoreFull refuses a new task when every slot holds a task still running.
var ErrStoreFull = errors.New("a2a: task store is full of running tasks")

// MaxPushConfigs is how many webhooks one task may have.
const MaxPushConfigs = 16

// Store is agentd's task store: bounded by a capacity, with finished tasks kept
// for a retention window and evicted oldest first. It stores immutable task
// snapshots by pointer: a stored *a2a.Task is never modified, so readers share
// it without a copy, and writers replace it with a new snapshot. A task's push
// notification configs live and die with it. It is safe for concurrent use;
// create it with NewStore.
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
	owner    string // the authenticated caller that created it; "" for none
	finished time.Time
	elem     *list.Element // in Store.finished once terminal
	push     []PushTarget  // webhooks, in registration order
}

// PushTarget is one webhook registered for a task, with the protocol version it
// was registered through (it decides the payload shape).
type PushTarget struct {
	Config  a2a.PushConfig
	Version string
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
func (s *Store) Put(t *a2a.Task) error { return s.put(t, "", false) }

// Create stores the first snapshot of a new task created by owner (the
// authenticated caller's name, or ""). It fails if the id exists.
func (s *Store) Create(t *a2a.Task, owner string) error { return s.put(t, owner, true) }

func (s *Store) put(t *a2a.Task, owner string, create bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expireLocked(now)
	st, ok := s.tasks[t.ID]
	if ok && create {
		return fmt.Errorf("a2a: task %s already exists", t.ID)
	}
	if !ok {
		if len(s.tasks) >= s.capacity && !s.evictOldestLocked() {
			return ErrStoreFull
		}
		st = &storedTask{owner: owner}
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

// GetOwned returns the current snapshot and the caller that created the task
// ("" for none); the caller must not modify the snapshot.
func (s *Store) GetOwned(id a2a.TaskID) (*a2a.Task, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.tasks[id]
	if !ok {
		return nil, "", false
	}
	return st.task, st.owner, true
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

// ListQuery selects and pages tasks. The zero value lists every task visible
// to an unauthenticated caller, DefaultPageSize at a time.
type ListQuery struct {
	Owner        string        // only tasks this caller created ("" : tasks created without authentication)
	ContextID    string        // only this context, when set
	State        a2a.TaskState // only this state, when set
	UpdatedAfter time.Time     // only tasks whose status changed after this, when set
	PageSize     int           // 1..MaxPageSize; 0 means DefaultPageSize
	PageToken    string        // from a previous page's NextPageToken
	// HistoryLength, when set, keeps at most that many history messages of
	// each task listed, the latest.
	HistoryLength *int
}

// Page sizes of ListTasks.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// ListPage is one page of tasks, most recently updated first.
type ListPage struct {
	Tasks         []*a2a.Task // snapshots; do not modify
	NextPageToken string      // "" on the last page
	PageSize      int
	TotalSize     int // tasks matching the query, over all pages
}

// errBadPageToken refuses a page token this store did not issue.
var errBadPageToken = fmt.Errorf("pageToken is not one this server issued: %w", a2a.ErrInvalidParams)

// List returns one page of the tasks matching q, sorted by status timestamp,
// newest first (ties by id), with a cursor for the next page. Pages are
// consistent under concurrent updates in the sense that the cursor is a
// position in that order, not an offset.
func (s *Store) List(q ListQuery) (ListPage, error) {
	size := q.PageSize
	switch {
	case size == 0:
		size = DefaultPageSize
	case size < 0 || size > MaxPageSize:
		return ListPage{}, fmt.Errorf("pageSize must be in 1..%d: %w", MaxPageSize, a2a.ErrInvalidParams)
	}
	if q.HistoryLength != nil && *q.HistoryLength < 0 {
		return ListPage{}, fmt.Errorf("historyLength must not be negative: %w", a2a.ErrInvalidParams)
	}
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
		if st.owner != q.Owner ||
			(q.ContextID != "" && t.ContextID != q.ContextID) ||
			(q.State != "" && t.Status.State != q.State) ||
			(!q.UpdatedAfter.IsZero() && !stamp(t).After(q.UpdatedAfter)) {
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

func stamp(t *a2a.Task) time.Time {
	if t.Status.Timestamp == nil {
		return time.Time{}
	}
	return *t.Status.Timestamp
}

// cursor is a position in List order: the last task of a page.
type cursor struct {
	at time.Time
	id string
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + ":" + c.id))
}

func parseCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, errBadPageToken
	}
	ns, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, errBadPageToken
	}
	return cursor{at: time.Unix(0, n), id: id}, nil
}

// before reports whether t comes after the cursor in List order.
func (c cursor) before(t *a2a.Task) bool {
	ts := stamp(t)
	if !ts.Equal(c.at) {
		return ts.Before(c.at)
	}
	return string(t.ID) < c.id
}

func (s *Store) taskLocked(id a2a.TaskID) (*storedTask, error) {
	st, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
	}
	return st, nil
}

// SetPush registers a webhook for a task, replacing one with the same id; an
// empty id gets a generated one. It returns the stored target.
func (s *Store) SetPush(id a2a.TaskID, target PushTarget) (PushTarget, error) {
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

// GetPush returns a task's webhook by id; an empty id returns the most
// recently registered one.
func (s *Store) GetPush(id a2a.TaskID, configID string) (PushTarget, error) {
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

// ListPush returns a task's webhooks in registration order; the slice is
// shared, do not modify it.
func (s *Store) ListPush(id a2a.TaskID) ([]PushTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return nil, err
	}
	return st.push, nil
}

// DeletePush removes a task's webhook. Deleting one that does not exist
// succeeds: the operation is idempotent.
func (s *Store) DeletePush(id a2a.TaskID, configID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.taskLocked(id)
	if err != nil {
		return err
	}
	st.push = slices.DeleteFunc(slices.Clone(st.push), func(p PushTarget) bool { return p.Config.ID == configID })
	return nil
}
