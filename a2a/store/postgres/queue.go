package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
)

// The admission queue the replicas share (schema version 2): a task that
// finds no free slot in the replica that accepted it waits in run_queue,
// its runner the queue's sentinel (queueRunner, whose lease never expires:
// the task is no replica's orphan while it waits). A replica with a free
// slot claims the next run of run_queue_order with FOR UPDATE SKIP LOCKED
// (replicas claiming at once take different runs, none waits for another)
// and becomes the task's runner in the same transaction: from then on the
// claim is tied to that replica's lease, and recovery resolves the task if
// the replica dies. Every insert NOTIFYs agentd_queue, which wakes the
// replicas (QueueChanged).

// queueRunner is the runner of a task waiting in the shared queue.
const queueRunner = "agentd:queue"

var errNoRows = pgx.ErrNoRows

// queueTrust is how long ClaimQueued trusts an empty queue it read while no
// run is announced.
const queueTrust = time.Second

var _ tasks.SharedQueue = (*Store)(nil)

// QueueLength implements tasks.SharedQueue.
func (s *Store) QueueLength(ctx context.Context, owner string) (int, int, error) {
	var all, owners int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE owner = $1) FROM run_queue`, owner).Scan(&all, &owners); err != nil {
		return 0, 0, s.unavailable("read the admission queue", err)
	}
	return all, owners, nil
}

// queueLock is the advisory lock that makes a bounded Enqueue's count and
// insert one step across replicas (only runs that find no slot take it).
const queueLock = 7422017

// Enqueue implements tasks.SharedQueue: the task, which this replica runs,
// is handed to the queue in one transaction.
func (s *Store) Enqueue(ctx context.Context, run tasks.QueuedRun, capacity, perCaller int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, s.unavailable("queue task", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if capacity > 0 {
		var all, owners int
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, queueLock)
		if err == nil {
			err = tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE owner = $1) FROM run_queue`, run.Owner).Scan(&all, &owners)
		}
		if err != nil {
			return 0, s.unavailable("queue task", err)
		}
		reason := ""
		switch {
		case all >= capacity:
			reason = admit.ReasonQueueFull
		case perCaller > 0 && owners >= perCaller:
			reason = admit.ReasonCallerQueueFull
		}
		if reason != "" {
			if _, err := tx.Exec(ctx, `DELETE FROM tasks WHERE id = $1 AND runner = $2 AND state = 'submitted'`, string(run.TaskID), s.instance); err != nil {
				return 0, s.unavailable("queue task", err)
			}
			if err := tx.Commit(ctx); err != nil {
				return 0, s.unavailable("queue task", err)
			}
			return 0, &tasks.QueueFullError{Reason: reason, Queued: all}
		}
	}
	tag, err := tx.Exec(ctx, `UPDATE tasks SET runner = $1 WHERE id = $2 AND runner = $3 AND finished_ns IS NULL`, queueRunner, string(run.TaskID), s.instance)
	if err != nil {
		return 0, s.unavailable("queue task", err)
	}
	if tag.RowsAffected() == 0 {
		return 0, notFound(run.TaskID)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO run_queue (task_id, owner, auth, operator, priority, request) VALUES ($1, $2, $3, $4, $5, $6)`,
		string(run.TaskID), run.Owner, run.Auth, run.Operator, int(run.Priority), run.Request); err != nil {
		return 0, s.unavailable("queue task", err)
	}
	var pos int
	if err := tx.QueryRow(ctx, `SELECT pos FROM run_queue_order WHERE task_id = $1`, string(run.TaskID)).Scan(&pos); err != nil {
		return 0, s.unavailable("queue task", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, s.unavailable("queue task", err)
	}
	return pos, nil
}

// ClaimQueued implements tasks.SharedQueue. The runs are tried in the
// queue's order, skipping those another replica is claiming; the first one
// admit accepts is this replica's, and one admit refuses ends the attempt
// (the next runs would find no slot either).
//
// The engine asks each time one of its runs ends: a queue found empty is
// not read again until a run is announced (agentd_queue), or queueTrust
// later (a lost announcement costs at most that).
func (s *Store) ClaimQueued(ctx context.Context, admit func(tasks.QueuedRun) bool) (tasks.QueuedRun, bool, error) {
	var run tasks.QueuedRun
	gen := s.queueGen.Load()
	if s.emptyGen.Load() == gen && time.Now().UnixNano()-s.emptyAt.Load() < int64(queueTrust) {
		return run, false, nil
	}
	var any bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM run_queue)`).Scan(&any); err != nil {
		return run, false, s.unavailable("claim a queued task", err)
	}
	if !any {
		s.emptyAt.Store(time.Now().UnixNano())
		s.emptyGen.Store(gen)
		return run, false, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return run, false, s.unavailable("claim a queued task", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var id string
	var prio int
	err = tx.QueryRow(ctx, `SELECT q.task_id, q.owner, q.auth, q.operator, q.priority, q.request
		FROM run_queue q JOIN run_queue_order o ON o.task_id = q.task_id
		ORDER BY o.pos LIMIT 1 FOR UPDATE OF q SKIP LOCKED`).Scan(&id, &run.Owner, &run.Auth, &run.Operator, &prio, &run.Request)
	if errors.Is(err, pgx.ErrNoRows) {
		return run, false, nil
	}
	if err != nil {
		return run, false, s.unavailable("claim a queued task", err)
	}
	run.TaskID, run.Priority = a2a.TaskID(id), admitPriority(prio)
	if !admit(run) {
		return run, false, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM run_queue WHERE task_id = $1`, id); err != nil {
		return run, false, s.unavailable("claim a queued task", err)
	}
	tag, err := tx.Exec(ctx, `UPDATE tasks SET runner = $1 WHERE id = $2 AND runner = $3`, s.instance, id, queueRunner)
	if err != nil {
		return run, false, s.unavailable("claim a queued task", err)
	}
	if tag.RowsAffected() == 0 {
		return run, false, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return run, false, s.unavailable("claim a queued task", err)
	}
	return run, true, nil
}

func admitPriority(p int) admit.Priority {
	if p < int(admit.Low) || p > int(admit.High) {
		return admit.Normal
	}
	return admit.Priority(p)
}

// QueuedByPriority implements tasks.SharedQueue.
func (s *Store) QueuedByPriority(ctx context.Context) (map[admit.Priority]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT priority, count(*) FROM run_queue GROUP BY priority`)
	if err != nil {
		return nil, s.unavailable("read the admission queue", err)
	}
	defer rows.Close()
	out := map[admit.Priority]int{}
	for rows.Next() {
		var p, n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, s.unavailable("read the admission queue", err)
		}
		out[admitPriority(p)] += n
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read the admission queue", err)
	}
	return out, nil
}

// RemoveQueued implements tasks.SharedQueue. A replica claiming the run at
// the same moment holds its row: the delete waits for that claim and then
// finds nothing (the task is the claimer's to cancel).
func (s *Store) RemoveQueued(ctx context.Context, id a2a.TaskID) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, s.unavailable("remove a queued task", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, `DELETE FROM run_queue WHERE task_id = $1`, string(id))
	if err != nil {
		return false, s.unavailable("remove a queued task", err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET runner = $1 WHERE id = $2 AND runner = $3`, s.instance, string(id), queueRunner); err != nil {
		return false, s.unavailable("remove a queued task", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, s.unavailable("remove a queued task", err)
	}
	return true, nil
}

// QueuePositions implements tasks.SharedQueue.
func (s *Store) QueuePositions(ctx context.Context, ids []a2a.TaskID) (map[a2a.TaskID]int, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = string(id)
	}
	rows, err := s.pool.Query(ctx, `SELECT task_id, pos FROM run_queue_order WHERE task_id = ANY($1)`, keys)
	if err != nil {
		return nil, s.unavailable("read the admission queue", err)
	}
	defer rows.Close()
	out := make(map[a2a.TaskID]int, len(ids))
	for rows.Next() {
		var id string
		var pos int
		if err := rows.Scan(&id, &pos); err != nil {
			return nil, s.unavailable("read the admission queue", err)
		}
		out[a2a.TaskID(id)] = pos
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read the admission queue", err)
	}
	return out, nil
}

// SetRunSlots implements tasks.SharedQueue.
func (s *Store) SetRunSlots(ctx context.Context, n int) error {
	if _, err := s.pool.Exec(ctx, `UPDATE leases SET max_runs = $1 WHERE instance = $2`, n, s.instance); err != nil {
		return s.unavailable("publish the run slots", err)
	}
	return nil
}

// QueueChanged implements tasks.SharedQueue.
func (s *Store) QueueChanged() <-chan struct{} { return s.queueWake }

func (s *Store) wakeQueue() {
	s.queueGen.Add(1)
	select {
	case s.queueWake <- struct{}{}:
	default:
	}
}
