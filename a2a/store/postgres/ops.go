package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/agentd/agentd/a2a/store"
)

// Inspect reports on the store: what `agentd store inspect` prints.
func (s *Store) Inspect(ctx context.Context) (store.Report, error) {
	r := store.Report{Store: "postgres", Where: s.where, Schema: SchemaVersion, Tasks: map[string]int{}, Runners: map[string]store.RunnerState{}}
	counts, err := s.CountByState(ctx)
	if err != nil {
		return r, err
	}
	for st, n := range counts {
		r.Tasks[string(st)] = n
	}
	rows, err := s.pool.Query(ctx, `SELECT t.runner, count(*), NOT `+fmt.Sprintf(deadRunner, "t.runner", "$1")+`
		FROM tasks t WHERE t.finished_ns IS NULL GROUP BY t.runner`, s.opts.LeaseTTL.Seconds())
	if err != nil {
		return r, s.unavailable("inspect", err)
	}
	defer rows.Close()
	for rows.Next() {
		var runner string
		var n int
		var up bool
		if err := rows.Scan(&runner, &n, &up); err != nil {
			return r, s.unavailable("inspect", err)
		}
		r.Runners[runner] = store.RunnerState{Alive: up, Tasks: n}
		r.Unfinished += n
		if !up {
			r.Orphans += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, s.unavailable("inspect", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM push_pending`).Scan(&r.Pending); err != nil {
		return r, s.unavailable("inspect", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM blobs`).Scan(&r.Blobs, &r.BlobBytes); err != nil {
		return r, s.unavailable("inspect", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&r.Bytes); err != nil {
		return r, s.unavailable("inspect", err)
	}
	return r, nil
}

// Prune removes the tasks that finished before before (with their webhooks,
// pending notifications and stored distillates) and every expired stored
// distillate. Unfinished tasks are never touched.
func (s *Store) Prune(ctx context.Context, before time.Time) (store.Pruned, error) {
	var p store.Pruned
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return p, s.unavailable("prune", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	cut := before.UnixNano()
	tag, err := tx.Exec(ctx, `DELETE FROM blobs WHERE (expires_ns IS NOT NULL AND expires_ns <= $1)
		OR owner IN (SELECT id FROM tasks WHERE finished_ns IS NOT NULL AND finished_ns <= $2)`, s.now(), cut)
	if err != nil {
		return p, s.unavailable("prune", err)
	}
	p.Blobs = int(tag.RowsAffected())
	tag, err = tx.Exec(ctx, `DELETE FROM tasks WHERE finished_ns IS NOT NULL AND finished_ns <= $1`, cut)
	if err != nil {
		return p, s.unavailable("prune", err)
	}
	p.Tasks = int(tag.RowsAffected())
	if err := tx.Commit(ctx); err != nil {
		return p, s.unavailable("prune", err)
	}
	return p, nil
}
