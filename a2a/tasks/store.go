package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// Store is the engine's only view of storage: each task's current snapshot
// with the caller that created it, and the task's push notification configs,
// which live and die with it.
//
// Snapshots are immutable: the engine never modifies a *a2a.Task it passed
// to Create or Put or got from Get or List, and neither may the store, so an
// implementation in memory may hand out the pointer it was given. An unknown
// task is an error that wraps a2a.ErrTaskNotFound. Methods take ctx because
// a durable implementation blocks on I/O; any other error is the store's
// failure, which the engine reports as an internal error. Implementations
// are safe for concurrent use. MemoryStore is the implementation in memory.
type Store interface {
	// Create stores the first snapshot of a new task created by owner (the
	// authenticated caller's name, or "" for none). It fails if the id
	// exists, and with ErrStoreFull when there is no room for it. The id of
	// the task's first message (t.History[0].ID, when there is one) is an
	// idempotency key: while the store holds a task that owner created from
	// a message with that id, Create stores nothing and returns a
	// *DuplicateError naming that task.
	Create(ctx context.Context, t *a2a.Task, owner string) error
	// Put replaces the snapshot of a stored task.
	Put(ctx context.Context, t *a2a.Task) error
	// Get returns a task's current snapshot and the caller that created it.
	Get(ctx context.Context, id a2a.TaskID) (t *a2a.Task, owner string, err error)
	// List returns one page of the tasks q selects, in the order ListQuery
	// describes. The engine has checked q: PageSize is in 1..MaxPageSize and
	// HistoryLength is not negative; a PageToken the store did not issue is
	// an error that wraps a2a.ErrInvalidParams.
	List(ctx context.Context, q ListQuery) (ListPage, error)
	// CountByState counts the stored tasks by state.
	CountByState(ctx context.Context) (map[a2a.TaskState]int, error)

	// SetPush registers a webhook for a task, replacing the one with the same
	// config id; an empty id gets a generated one. It returns the stored
	// target, and refuses a task's MaxPushConfigs+1st webhook (an error that
	// wraps a2a.ErrInvalidParams).
	SetPush(ctx context.Context, id a2a.TaskID, target PushTarget) (PushTarget, error)
	// GetPush returns a task's webhook by config id; an empty id returns the
	// most recently registered one.
	GetPush(ctx context.Context, id a2a.TaskID, configID string) (PushTarget, error)
	// ListPush returns a task's webhooks in registration order; the caller
	// does not modify the slice.
	ListPush(ctx context.Context, id a2a.TaskID) ([]PushTarget, error)
	// DeletePush removes a task's webhook; removing one that does not exist
	// succeeds.
	DeletePush(ctx context.Context, id a2a.TaskID, configID string) error
}

// ErrStoreFull refuses a new task when the store has no room for it.
var ErrStoreFull = errors.New("tasks: task store is full of running tasks")

// ErrStoreUnavailable is wrapped by a durable store's errors when its
// database cannot be reached or written (a lost connection, a read-only or
// full disk): nothing was stored, and the request may be retried once the
// database is back.
var ErrStoreUnavailable = errors.New("tasks: the task store is unavailable")

// DuplicateError is Create's answer to a message whose id the same caller
// already sent: Existing is the task that message created.
type DuplicateError struct {
	Existing  a2a.TaskID
	MessageID string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("tasks: message %s already created task %s", e.MessageID, e.Existing)
}

// MessageKey is a task's idempotency key: the id of its first message, or ""
// when it has none.
func MessageKey(t *a2a.Task) string {
	if len(t.History) == 0 || t.History[0] == nil {
		return ""
	}
	return t.History[0].ID
}

// MaxPushConfigs is how many webhooks one task may have.
const MaxPushConfigs = 16

// PushTarget is one webhook registered for a task, with the protocol version it
// was registered through (it decides the payload shape).
type PushTarget struct {
	Config  a2a.PushConfig
	Version string
}

// ListQuery selects and pages tasks. The order is by status timestamp, newest
// first, ties by id; a page token is a position in that order, not an offset,
// so pages stay consistent while tasks change. Given to Engine.ListTasks, the
// zero value lists the caller's tasks, DefaultPageSize at a time.
type ListQuery struct {
	Owner        string        // only tasks this caller created ("" : tasks created without authentication)
	AnyOwner     bool          // every caller's tasks: Owner is ignored (an operator's list)
	ContextID    string        // only this context, when set
	State        a2a.TaskState // only this state, when set
	UpdatedAfter time.Time     // only tasks whose status changed at or after this, when set (a2a.proto: "greater than or equal to")
	PageSize     int           // 1..MaxPageSize; 0 means DefaultPageSize (to Engine.ListTasks)
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
