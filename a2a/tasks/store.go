package tasks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
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
//
// A store may implement more of the interfaces below, which the engine finds
// by interface assertion: Durable (tasks outlive the process), Syncer and
// TaskSyncer (writes that return before they are durable), Elsewhere (several
// processes open it without sharing their runs), PushJournal and EndJournal
// (push notifications survive a restart), Shared (several processes serve it
// at once) and, over Shared, Fencing, PushWatcher and SharedQueue.
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

// ErrFenced is wrapped by a store's refusal to write a task this process no
// longer runs: another process took it over (this one's lease had lapsed,
// and the task was claimed as an orphan). The engine then stops the task's
// tree and forgets the task: its new runner resolves it.
var ErrFenced = errors.New("tasks: the task was taken over by another replica")

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
	// Caller, when set, keeps only the tasks that caller created ("" for
	// none), within what Owner and AnyOwner select (an operator's filter).
	Caller *string
	// UpdatedBefore, when set, keeps only tasks whose status changed
	// before it (the console's time range).
	UpdatedBefore time.Time
	// Text, when set, keeps only tasks whose stored snapshot (the task's
	// A2A JSON: its id, its objective and every other message, artifact
	// and metadata value) contains it, ignoring the case of ASCII letters.
	// It is data, never a pattern: no character is special.
	Text      string
	PageSize  int    // 1..MaxPageSize; 0 means DefaultPageSize (to Engine.ListTasks)
	PageToken string // from a previous page's NextPageToken
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

// WaitingKeeper is implemented by a Durable store that keeps, with a task,
// the record of its tree while the task's question waits for its caller's
// answer (api.WaitingTree, opaque bytes to the store): a task whose runner
// is lost while it waits is not lost (Recover resumes it from the record
// once the answer comes, waiting.go).
type WaitingKeeper interface {
	// KeepWaiting keeps a task's waiting record, replacing any kept
	// before; nil forgets it.
	KeepWaiting(ctx context.Context, id a2a.TaskID, rec []byte) error
	// Waiting returns a task's waiting record, or nil when none is kept.
	Waiting(ctx context.Context, id a2a.TaskID) ([]byte, error)
}

// MessageKeeper is implemented by a Durable store that writes a running
// task's snapshot without being handed its first message whole (the engine
// leaves a large one to the store while the task runs, hollow.go):
// PutKeeping stores t as Put does, with t.History[0], a copy of the stored
// snapshot's first message whose large text was left out, replaced by the
// stored message, its bytes copied from the stored snapshot, not decoded.
// When the stored snapshot's first message is not the one of t.History[0]'s
// id, it stores nothing and fails with an error wrapping ErrNotKept.
// KeptMessage reads that message back: hollow (the engine's copy) with the
// text of each of its empty text parts read from the stored snapshot, only
// that text decoded; an error wrapping ErrNotKept when the stored first
// message is not hollow's.
type MessageKeeper interface {
	PutKeeping(ctx context.Context, t *a2a.Task) error
	KeptMessage(ctx context.Context, id a2a.TaskID, hollow *a2a.Message) (*a2a.Message, error)
}

// ErrNotKept is MessageKeeper's refusal of a snapshot whose first message
// the store does not hold: the engine writes the task whole instead.
var ErrNotKept = errors.New("tasks: the stored snapshot does not hold the task's first message")

// Orphan is an unfinished task whose runner is gone.
type Orphan struct {
	Task   *a2a.Task
	Runner string // the instance that was running it
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

// Elsewhere is an optional interface of a Store that several processes open
// without sharing their runs (SQLite: two agentd on one state directory):
// RunnerOf names the instance that runs an unfinished task and whether it
// is alive ("" for a finished or unknown task).
type Elsewhere interface {
	RunnerOf(ctx context.Context, id a2a.TaskID) (instance string, alive bool, err error)
}

// PushJournal keeps the push notifications not yet delivered. It is safe for
// concurrent use.
type PushJournal interface {
	// AddPending records an event to deliver and returns its sequence
	// number (increasing).
	AddPending(ctx context.Context, p PendingPush) (int64, error)
	// DonePending forgets a delivered event.
	DonePending(ctx context.Context, seq int64) error
	// Pending returns the events not yet delivered, in sequence order.
	Pending(ctx context.Context) ([]PendingPush, error)
}

// EndJournal is implemented by a PushJournal store that journals a task's
// end in the transaction of its terminal write. Journaled after the write, the
// end's notification (the one a webhook waits for) would be lost to a process
// killed between the two: the task is ended, so no recovery looks at it again.
type EndJournal interface {
	PushJournal
	// PutEnd is Put of a task's terminal snapshot that also records, in the
	// same transaction and only if the task has webhooks when it commits, the
	// end's notification: a PendingPush whose Snapshot is the stored snapshot
	// and whose Event is empty (Resume builds it from the snapshot). It
	// returns the entry's sequence number, 0 when the task has no webhooks.
	PutEnd(ctx context.Context, t *a2a.Task) (seq int64, err error)
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

// Forwarder is implemented by a Shared store that carries a follow-up
// message (an answer to a question among them) from the process a caller
// sent it to to the process running its task: the message is stored until
// the runner takes it (joins it to the task, as if sent there) or refuses
// it, and the sender answers its caller from the outcome. Implementations
// are safe for concurrent use.
type Forwarder interface {
	Shared
	// Forward stores msg for the process running task id and tells that
	// process; it returns the entry's number.
	Forward(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (int64, error)
	// Renotify tells the process running task id again of its entries (a
	// runner lost before it took them, or a notification lost).
	Renotify(ctx context.Context, id a2a.TaskID) error
	// Forwarded delivers the id of each task a message was forwarded to; an
	// empty id says some may have been missed (every live task's entries
	// are to be read). It is closed when the store is.
	Forwarded() <-chan a2a.TaskID
	// PendingForwards returns task id's entries neither taken nor refused,
	// oldest first.
	PendingForwards(ctx context.Context, id a2a.TaskID) ([]ForwardedMessage, error)
	// SettleForward records the runner's outcome of entry seq of task id:
	// refusal nil deletes the entry (the message joined the task), else the
	// refusal is kept for the sender. The task's watchers are woken.
	SettleForward(ctx context.Context, id a2a.TaskID, seq int64, refusal *ForwardRefusal) error
	// ForwardOutcome returns entry seq's refusal (nil while it waits or once
	// taken) and whether the entry still exists.
	ForwardOutcome(ctx context.Context, seq int64) (refusal *ForwardRefusal, exists bool, err error)
	// DropForward deletes entry seq (its sender has answered).
	DropForward(ctx context.Context, seq int64) error
}

// ForwardedMessage is one message a Forwarder holds for a task's runner.
type ForwardedMessage struct {
	Seq     int64
	Message *a2a.Message
}

// ForwardRefusal is the runner's refusal of a forwarded message: the
// error's text and its kind (ForwardRefusal.Err rebuilds the error).
type ForwardRefusal struct {
	Code string `json:"code"`
	Text string `json:"text"`
}

// Fencing is implemented by a Shared store (safe for concurrent use) that
// tells a process which of its
// tasks another process took over while its lease had lapsed, so that their
// trees stop before their next write is refused.
type Fencing interface {
	// TakenOver delivers the ids of this process's tasks that another
	// process took over; it is closed when the store is.
	TakenOver() <-chan a2a.TaskID
}

// PushWatcher is implemented by a Shared store that tells the process
// running a task of the webhooks any process registers for it: the engine
// then reads nothing, event by event, to learn of webhooks registered
// through other processes. With an EndJournal store the task's terminal
// write finds out whether it has webhooks (PutEnd reads them in its
// transaction, after the snapshot is written: a registration that committed
// before the write is seen, and one that had not finds the task ended).
// Implementations are safe for concurrent use.
type PushWatcher interface {
	Shared
	// PushRegistered delivers the id of each task that a webhook was
	// registered for, through any process, once the registration has
	// committed. An empty id says some may have been missed (a lost
	// connection): every task's webhooks are to be read again. It is closed
	// when the store is.
	PushRegistered() <-chan a2a.TaskID
}

// pushChecker is implemented by a Shared store that tells in one read
// whether a task has webhooks (ListPush of none checks the task exists).
type pushChecker interface {
	HasPush(ctx context.Context, id a2a.TaskID) (bool, error)
}

// SharedQueue is implemented by a Shared store (safe for concurrent use, as
// every Store) that holds the admission
// queue for every process serving it (replicas on one PostgreSQL): a task
// that finds no free slot in the process that accepted it waits in the
// store, and any process with a free slot claims it and runs it, same task
// id, from the request kept with it. An engine with admission control uses
// it in place of the controller's own queue; the controller still bounds
// each process's runs and processes (admit.Controller.TryStart). Stores
// without it (memory, SQLite) keep the queue in the process.
type SharedQueue interface {
	Shared
	// QueueLength returns how many runs wait in the queue, and how many of
	// them owner's.
	QueueLength(ctx context.Context, owner string) (all, owners int, err error)
	// Enqueue puts a stored task this process runs into the queue: from
	// then on no process runs it (it is never an orphan) until one claims
	// it. It returns the run's position (1 is next). With capacity > 0,
	// a queue that holds capacity runs, or perCaller of the run's owner,
	// takes no more: the task is deleted (it never ran, and nobody was
	// told of it) and the answer is a *QueueFullError.
	Enqueue(ctx context.Context, run QueuedRun, capacity, perCaller int) (int, error)
	// ClaimQueued takes the next run of the queue's order that admit
	// accepts (admit takes this process's slot for it, and is asked about
	// the next run only); this process becomes the task's runner. It
	// reports false when the queue is empty or admit refused.
	ClaimQueued(ctx context.Context, admit func(QueuedRun) bool) (QueuedRun, bool, error)
	// RemoveQueued takes a run out of the queue before any process claimed
	// it, and makes this process its runner; false when it was not queued
	// (claimed meanwhile, or never queued).
	RemoveQueued(ctx context.Context, id a2a.TaskID) (bool, error)
	// QueuedByPriority counts the runs waiting in the queue by priority.
	QueuedByPriority(ctx context.Context) (map[admit.Priority]int, error)
	// QueuePositions returns the positions (1 is next) of those of ids
	// that are queued; the others are not in the map.
	QueuePositions(ctx context.Context, ids []a2a.TaskID) (map[a2a.TaskID]int, error)
	// SetRunSlots publishes this process's run slots (its bound on runs
	// at once): the fair shares of the queue's order divide the sum over
	// the live processes.
	SetRunSlots(ctx context.Context, n int) error
	// QueueChanged receives a value (coalesced) when runs may have been
	// queued by any process; it is closed when the store is.
	QueueChanged() <-chan struct{}
	// Runner returns the process that runs an unfinished task, "" for one
	// queued or finished.
	Runner(ctx context.Context, id a2a.TaskID) (string, error)
}

// Auditor is implemented by a store that keeps the audit trail of operator
// actions (a2a.Audit reads it): every store agentd ships does, so replicas
// on one PostgreSQL share one trail. The trail is bounded: a store keeps at
// most its AuditKeep newest records (default DefaultAuditKeep) and none
// older than its AuditMaxAge (default DefaultAuditMaxAge) by its clock;
// AppendAudit drops the others. Implementations are safe for concurrent
// use.
type Auditor interface {
	// AppendAudit adds a record to the trail (its text made storable by
	// CleanAudit).
	AppendAudit(ctx context.Context, r api.AuditRecord) error
	// ListAudit returns a page of the trail, newest first (the order of
	// AppendAudit), of at most q.Limit records (the caller checked it is in
	// 1..api.MaxAuditLimit); q.Method and q.Caller, when set, match
	// exactly, and a filter no store can hold (Storable) matches nothing.
	// q.Before is the Next of an earlier page; one the store did not issue
	// is an error wrapping ErrAuditCursor and a2a.ErrInvalidParams.
	ListAudit(ctx context.Context, q api.AuditParams) (api.AuditResult, error)
}

// Retention of the audit trail (Auditor): a store's defaults.
const (
	DefaultAuditKeep   = 10000
	DefaultAuditMaxAge = 90 * 24 * time.Hour
)

// MaxAuditDetail bounds the bytes of an audit record's Detail and Target as
// stored (CleanAudit).
const MaxAuditDetail = 1024

// ErrAuditCursor is wrapped (with a2a.ErrInvalidParams) by ListAudit's
// refusal of a Before it did not issue.
var ErrAuditCursor = errors.New("tasks: not a cursor of the audit trail")

// auditCursorPrefix marks the cursors of the audit trail.
const auditCursorPrefix = "audit."

// AuditCursor is the opaque cursor of the records older than the one at
// seq, the position of a record in a store's trail (increasing).
func AuditCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(auditCursorPrefix + strconv.FormatInt(seq, 10)))
}

// ParseAuditCursor returns the position of an AuditCursor; any other text
// is an error wrapping ErrAuditCursor and a2a.ErrInvalidParams.
func ParseAuditCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(b), auditCursorPrefix); ok {
			if seq, err := strconv.ParseInt(rest, 10, 64); err == nil && seq > 0 {
				return seq, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: %w (before %.40q)", ErrAuditCursor, a2a.ErrInvalidParams, s)
}

// CleanAudit returns r with text every store holds: invalid UTF-8 and NUL
// bytes replaced by U+FFFD, Target and Detail cut to MaxAuditDetail bytes.
func CleanAudit(r api.AuditRecord) api.AuditRecord {
	clean := func(s string, max int) string {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
		if max > 0 && len(s) > max {
			cut := max
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			s = s[:cut] + "…"
		}
		return s
	}
	r.Caller = clean(r.Caller, MaxAuditDetail)
	r.Method = clean(r.Method, MaxAuditDetail)
	r.Target = clean(r.Target, MaxAuditDetail)
	r.Outcome = clean(r.Outcome, MaxAuditDetail)
	r.Detail = clean(r.Detail, MaxAuditDetail)
	r.Instance = clean(r.Instance, MaxAuditDetail)
	r.Time = r.Time.UTC()
	return r
}

// StepStore is implemented by a store that keeps what each task's tree did,
// step by step (api.Step: model calls, tool calls, each subagent's start and
// end), for the console's task page once the tree is gone from memory. A
// tree's steps are bounded by a byte budget (the declared retention: a tree
// keeps at most budget bytes of steps, the oldest; the first step past it is
// kept as one api.StepDropped marker, the later ones are not kept) and live
// and die with the task: when the store deletes the task (expiry, eviction),
// its steps go with it. Implementations are safe for concurrent use.
type StepStore interface {
	// AddSteps appends recs (Seq ignored) to the steps of stored task root,
	// in order, within budget bytes of Body in all. The steps of a task
	// the store does not hold are dropped, without an error.
	AddSteps(ctx context.Context, root a2a.TaskID, recs []StepRecord, budget int64) error
	// Steps returns at most limit of root's steps after sequence number
	// after (0: from the first), in order; none for an unknown task.
	Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]StepRecord, error)
}

// StepRecord is one stored step: its sequence number in its tree (from 1,
// increasing), its kind (api.Step's) and its api.Step JSON.
type StepRecord struct {
	Seq  int64
	Kind string
	Body []byte
}
