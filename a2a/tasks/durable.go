package tasks

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

// Durable is implemented by a store whose tasks outlive the process that
// wrote them (the embedded SQLite store, PostgreSQL). Every task such a store
// creates is marked with the process that runs it (its runner: the store's
// instance); a task left unfinished by a runner that is gone (it crashed, or
// its lease expired) is an orphan, which Engine.Recover resolves.
//
// The engine hands the store, for each root task, the payload its executor
// would need to run it again (opaque bytes to the store: Retainer), so that
// the rerun recovery policy can start it once more.
type Durable interface {
	Store
	// Instance is the runner id this store marks the tasks it creates with.
	Instance() string
	// Retain keeps a task's spawn payload, replacing any kept before.
	Retain(ctx context.Context, id a2a.TaskID, payload []byte) error
	// Retained returns a task's spawn payload, or nil when none was kept.
	Retained(ctx context.Context, id a2a.TaskID) ([]byte, error)
	// Orphans returns the unfinished tasks whose runner is gone, oldest
	// first. This store's own tasks are never orphans.
	Orphans(ctx context.Context) ([]Orphan, error)
	// Claim makes this store's instance the runner of an orphan that runner
	// from left; it reports false when another process claimed it first (or
	// it finished meanwhile), and then the orphan is not this process's to
	// resolve.
	Claim(ctx context.Context, id a2a.TaskID, from string) (bool, error)
}

// Orphan is an unfinished task whose runner is gone.
type Orphan struct {
	Task   *a2a.Task
	Runner string // the instance that was running it
}

// Retainer is implemented by the event queue the Engine hands an executor
// when its store is Durable, and only then: Retain keeps the payload the
// executor would run the task from again (a Rerunner reads it back). Over
// another store there is nothing to encode a payload for.
type Retainer interface {
	Retain(ctx context.Context, payload []byte) error
}

// Rerunner is implemented by an executor that can run a task again from the
// payload it retained (the rerun recovery policy). Rerun is Execute for a
// task that already exists: reqCtx.StoredTask is its snapshot.
type Rerunner interface {
	Rerun(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, payload []byte) error
}

// LostMetadata is implemented by an executor that labels the failed status
// the engine writes for a task whose runner was lost (the fail recovery
// policy, and a rerun that cannot be made).
type LostMetadata interface {
	LostMetadata() map[string]any
}

// Shared is implemented by a store that several processes serve at once
// (PostgreSQL replicas behind one Service): any of them answers for any task.
// A task runs in the process that accepted it; the others follow it through
// the store (Watch) and ask that process to cancel it (RequestCancel,
// delivered to it by Cancels).
type Shared interface {
	Durable
	// Watch returns a channel that receives a value (coalesced) each time
	// another process may have stored a new snapshot of the task, until ctx
	// ends, when it is closed. A change made between Watch and a read of
	// the task is not missed.
	Watch(ctx context.Context, id a2a.TaskID) <-chan struct{}
	// RequestCancel asks the process running the task to cancel it.
	RequestCancel(ctx context.Context, id a2a.TaskID) error
	// Cancels delivers the ids of the tasks other processes asked to cancel;
	// it is closed when the store is.
	Cancels() <-chan a2a.TaskID
}

// Syncer is implemented by a store whose writes may return before they are
// durable: the embedded store stages a new task in its open transaction
// (group commit), PostgreSQL commits it without waiting for the WAL flush.
// Sync returns once every write that returned before it is durable. The
// engine syncs before anyone is told of a task (a send's answer, a read, a
// stream's first snapshot), unless a later write of that task returned:
// every other write it waits for is durable when it returns, and so is what
// the store wrote of the task before it (its creation).
type Syncer interface {
	Sync(ctx context.Context) error
}

// TaskSyncer is a Syncer that knows which creations it lost: a staged
// creation is answered before its transaction commits, and a commit that
// fails (a full disk) loses it, perhaps before anyone syncs. SyncTask is
// Sync, and fails with an error wrapping ErrStoreUnavailable when the
// creation of task id was lost: the engine tells no one of a task whose
// SyncTask failed, and stops its run.
type TaskSyncer interface {
	Syncer
	SyncTask(ctx context.Context, id a2a.TaskID) error
}
