package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentd/agentd/a2a/tasks"
)

// Fencing. A replica paused past its lease (SIGSTOP, a long GC pause, a
// frozen VM) may find, when it comes back, that another replica took its
// tasks over: it must write nothing more to them. Every connection of a
// replica carries its instance id as the run-time parameter agentd.instance,
// and a trigger of schema version 2 refuses any change of a task by a
// replica that is not its runner while that runner lives (or after the task
// finished) (SQLSTATE AG001), except a takeover itself
// (a change of runner, which raises the task's epoch and records whom it
// was taken from). The refusal reaches the engine as tasks.ErrFenced, which
// stops the task's tree. So that a tree does not run on until its next
// write, the heartbeat that finds this replica's lease had lapsed looks for
// the tasks taken from it (TakenOver).

// instanceParam is the run-time parameter naming a connection's replica.
const instanceParam = "agentd.instance"

// leaseParam is the run-time parameter giving the lease's length in
// seconds, by which the trigger tells an orphan from a live replica's task.
const leaseParam = "agentd.lease_seconds"

// fenceCode is the SQLSTATE of the fencing trigger's refusal.
const fenceCode = "AG001"

// fenceChecks is how many heartbeats after a lapse look for tasks taken
// over: a replica that listed this one's tasks as orphans just before the
// lease was renewed may claim them a little later.
const fenceChecks = 4

// fenceState is what the heartbeat remembers between renewals.
type fenceState struct {
	checks   int                     // heartbeats left that look for tasks taken over
	reported map[a2a.TaskID]struct{} // taken-over tasks already delivered on takenOver
}

var _ tasks.Fencing = (*Store)(nil)

// fenced returns tasks.ErrFenced with the database's words when err is the
// fencing trigger's refusal, else nil.
func fenced(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == fenceCode {
		return fmt.Errorf("%w: %s", tasks.ErrFenced, pe.Message)
	}
	return nil
}

// renew renews this replica's lease (taking it again if its row is gone),
// and when the lease had lapsed, delivers the tasks another replica took
// over meanwhile on TakenOver.
func (s *Store) renew(ctx context.Context) error {
	var lapsed bool
	err := s.pool.QueryRow(ctx, `WITH old AS (SELECT heartbeat FROM leases WHERE instance = $1)
		INSERT INTO leases (instance, heartbeat, started) VALUES ($1, now(), now())
		ON CONFLICT (instance) DO UPDATE SET heartbeat = now()
		RETURNING coalesce((SELECT heartbeat < now() - make_interval(secs => $2) FROM old), true)`,
		s.instance, s.opts.LeaseTTL.Seconds()).Scan(&lapsed)
	if err != nil {
		return err
	}
	if lapsed {
		s.opts.Log.Warn("lease had lapsed: looking for this replica's tasks another one took over", "instance", s.instance)
		s.fence.checks = fenceChecks
	}
	if s.fence.checks == 0 {
		return nil
	}
	s.fence.checks--
	return s.reportTakenOver(ctx)
}

// reportTakenOver delivers on takenOver each task taken from this replica
// by another one that it has not delivered before.
func (s *Store) reportTakenOver(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT id FROM tasks WHERE taken_from = $1 AND runner <> $1 AND runner <> $2`, s.instance, queueRunner)
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []a2a.TaskID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, a2a.TaskID(id))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if s.fence.reported == nil {
		s.fence.reported = map[a2a.TaskID]struct{}{}
	}
	for _, id := range ids {
		if _, ok := s.fence.reported[id]; ok {
			continue
		}
		s.fence.reported[id] = struct{}{}
		s.opts.Log.Warn("task taken over by another replica while this one's lease had lapsed", "task_id", string(id), "instance", s.instance)
		select {
		case s.takenOver <- id:
		default:
			// Nobody reads fast enough (or at all): the heartbeat does not
			// wait, and the database still refuses the task's next write.
		}
	}
	return nil
}

// TakenOver implements tasks.Fencing.
func (s *Store) TakenOver() <-chan a2a.TaskID { return s.takenOver }

// Runner implements tasks.SharedQueue: the replica that runs an unfinished
// task ("" for one waiting in the shared queue, or finished).
func (s *Store) Runner(ctx context.Context, id a2a.TaskID) (string, error) {
	var runner string
	var finished bool
	err := s.pool.QueryRow(ctx, `SELECT runner, finished_ns IS NOT NULL FROM tasks WHERE id = $1`, string(id)).Scan(&runner, &finished)
	if err != nil {
		if errors.Is(err, errNoRows) {
			return "", notFound(id)
		}
		return "", s.unavailable("read the task's runner", err)
	}
	if finished || runner == queueRunner {
		return "", nil
	}
	return runner, nil
}
