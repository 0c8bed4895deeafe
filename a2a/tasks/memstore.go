package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/budget"
)

// MemoryStore is the Store in memory, bounded by count and by bytes (Size of
// every snapshot held), in all and per caller (the task's owner). Finished
// tasks are kept for a retention window and evicted as package budget's
// policy says: to make room for a caller's new task, that caller's oldest
// finished tasks go first, then the oldest finished tasks of callers over
// their fair share (the store's bounds divided by the callers holding tasks,
// within the quota); a caller within its share never loses a task to another
// caller's. A new task that finds no room is refused with ErrStoreFull, and
// one whose caller's quota is full of running tasks with ErrCallerQuota. It
// keeps the snapshots it is given by pointer and hands them out without a
// copy. It never blocks on I/O and never fails but as the Store documents.
// It is safe for concurrent use; create it with NewMemoryStore or
// NewMemoryStoreLimits.
type MemoryStore struct {
	mu        sync.Mutex // guards tasks, messages, led
	tasks     map[a2a.TaskID]*storedTask
	messages  map[messageKey]a2a.TaskID // idempotency keys of the stored tasks
	led       *budget.Ledger[a2a.TaskID]
	retention time.Duration
	now       func() time.Time
	audit     auditTrail // the operators' audit trail (Auditor)
}

var (
	_ Store   = (*MemoryStore)(nil)
	_ Auditor = (*MemoryStore)(nil)
)

// messageKey is a caller's message id: a task's idempotency key.
type messageKey struct{ owner, id string }

type storedTask struct {
	task  *a2a.Task
	owner string                   // the authenticated caller that created it; "" for none
	msgID string                   // its idempotency key (MessageKey), kept so that evicting it reads nothing of the task
	ent   budget.Entry[a2a.TaskID] // its count and size in the ledger (AdmitEntry)
	push  []PushTarget             // webhooks, in registration order
	steps stepLog                  // what its tree did (StepStore), gone with it

	// The size of a prefix of the task's history, so a snapshot that only
	// appends to it is sized by its new messages (and its status and
	// artifacts): histN messages, the last histLast, histBytes in all.
	histN     int
	histLast  *a2a.Message
	histBytes int64
}

// Defaults of MemoryLimits.
const (
	DefaultCapacity   = 10000
	DefaultStoreBytes = 256 << 20
)

// MemoryLimits bound a MemoryStore. The zero value of a field means its
// default.
type MemoryLimits struct {
	// Capacity is how many tasks the store holds; default DefaultCapacity.
	Capacity int
	// Bytes is how many bytes of snapshots (Size) the store holds; default
	// DefaultStoreBytes. Running tasks that grow may take the store over it
	// (a write is never refused); finished ones are evicted to make up.
	Bytes int64
	// QuotaTasks and QuotaBytes bound one caller's tasks (nested tasks count
	// for the caller of their root); default the store's bounds, i.e. no
	// quota of its own.
	QuotaTasks int
	QuotaBytes int64
	// Retention is how long a finished task is kept; 0 keeps it until it is
	// evicted.
	Retention time.Duration
	// AuditKeep and AuditMaxAge bound the audit trail (Auditor); default
	// DefaultAuditKeep and DefaultAuditMaxAge.
	AuditKeep   int
	AuditMaxAge time.Duration
}

func (l MemoryLimits) withDefaults() MemoryLimits {
	if l.Capacity <= 0 {
		l.Capacity = DefaultCapacity
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultStoreBytes
	}
	if l.QuotaTasks <= 0 || l.QuotaTasks > l.Capacity {
		l.QuotaTasks = l.Capacity
	}
	if l.QuotaBytes <= 0 || l.QuotaBytes > l.Bytes {
		l.QuotaBytes = l.Bytes
	}
	return l
}

// Errors of Create beyond the Store's.
var (
	// ErrCallerQuota refuses a new task whose caller's quota holds only
	// running tasks (or which alone is over the caller's byte quota).
	ErrCallerQuota = errors.New("tasks: the caller's task quota is full of running tasks")
)

// NewMemoryStore returns a store holding at most capacity tasks (10000 when
// capacity <= 0) and DefaultStoreBytes, keeping finished ones for retention
// (0 keeps them until they are evicted), with no per-caller quota.
func NewMemoryStore(capacity int, retention time.Duration) *MemoryStore {
	return NewMemoryStoreLimits(MemoryLimits{Capacity: capacity, Retention: retention})
}

// NewMemoryStoreLimits returns a store within l.
func NewMemoryStoreLimits(l MemoryLimits) *MemoryStore {
	l = l.withDefaults()
	return &MemoryStore{
		tasks:     make(map[a2a.TaskID]*storedTask),
		messages:  make(map[messageKey]a2a.TaskID),
		led:       budget.New[a2a.TaskID](budget.Limits{MaxCount: l.Capacity, MaxBytes: l.Bytes, QuotaCount: l.QuotaTasks, QuotaBytes: l.QuotaBytes}),
		retention: l.Retention,
		now:       time.Now,
		audit:     auditTrail{keep: l.AuditKeep, maxAge: l.AuditMaxAge},
	}
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, t *a2a.Task, owner string) error {
	if err := CheckNewTask(t, owner); err != nil {
		return err
	}
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
	st := &storedTask{owner: owner, msgID: key.id}
	evicted, err := s.led.AdmitEntry(&st.ent, t.ID, owner, st.measure(t))
	switch {
	case errors.Is(err, budget.ErrFull):
		return fmt.Errorf("%w: %w", ErrStoreFull, err)
	case errors.Is(err, budget.ErrQuota), errors.Is(err, budget.ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrCallerQuota, err)
	case err != nil:
		return err
	}
	s.dropLocked(evicted)
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
	s.dropLocked(s.led.ResizeEntry(&st.ent, st.measure(t)))
	s.setLocked(st, t, now)
	return nil
}

// measure returns t's Size, sizing only the history messages past the prefix
// st has seen, and remembers t's history.
func (st *storedTask) measure(t *a2a.Task) int64 {
	h := t.History
	if st.histN > len(h) || (st.histN > 0 && h[st.histN-1] != st.histLast) {
		st.histN, st.histLast, st.histBytes = 0, nil, 0 // not an append: size it all
	}
	for _, m := range h[st.histN:] {
		st.histBytes += MessageSize(m)
	}
	st.histN = len(h)
	if st.histN > 0 {
		st.histLast = h[st.histN-1]
	}
	return int64(sizeTask+len(t.ID)+len(t.ContextID)) + valueSize(t.Metadata) + st.histBytes + statusArtifactsSize(t)
}

// setLocked makes t the task's snapshot; a task that turns terminal becomes
// evictable.
func (s *MemoryStore) setLocked(st *storedTask, t *a2a.Task, now time.Time) {
	st.task = t
	if t.Status.State.Terminal() {
		s.led.FinishEntry(&st.ent, now)
	}
}

func (s *MemoryStore) dropLocked(ids []a2a.TaskID) {
	for _, id := range ids {
		if st, ok := s.tasks[id]; ok {
			delete(s.messages, messageKey{st.owner, st.msgID})
			delete(s.tasks, id)
		}
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

// Usage returns the tasks and bytes held, in all and by owner.
func (s *MemoryStore) Usage(owner string) (tasks int, bytes int64, ownerTasks int, ownerBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tasks, bytes = s.led.Total()
	ownerTasks, ownerBytes = s.led.Usage(owner)
	return tasks, bytes, ownerTasks, ownerBytes
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

func (s *MemoryStore) expireLocked(now time.Time) {
	if s.retention <= 0 {
		return
	}
	s.dropLocked(s.led.Expire(now.Add(-s.retention)))
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
			(!q.UpdatedAfter.IsZero() && stamp(t).Before(q.UpdatedAfter)) ||
			(!q.UpdatedBefore.IsZero() && !stamp(t).Before(q.UpdatedBefore)) ||
			(q.Text != "" && !containsText(t, q.Text)) ||
			(q.Caller != nil && st.owner != *q.Caller) {
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
	if err := CheckPushID(target.Config.ID); err != nil {
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
