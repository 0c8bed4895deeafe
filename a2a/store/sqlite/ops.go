package sqlite

import (
	"context"
	"os"
	"time"

	"github.com/agentd/agentd/a2a/store"
)

// Inspect reports on the store: what `agentd store inspect` prints.
func (s *Store) Inspect(ctx context.Context) (store.Report, error) {
	if err := s.Sync(ctx); err != nil {
		return store.Report{}, err
	}
	r := store.Report{Store: "sqlite", Where: s.path, Schema: SchemaVersion, Tasks: map[string]int{}, Runners: map[string]store.RunnerState{}}
	counts, err := s.CountByState(ctx)
	if err != nil {
		return r, err
	}
	for st, n := range counts {
		r.Tasks[string(st)] = n
	}
	rows, err := s.rs.QueryContext(ctx, `SELECT runner, COUNT(*) FROM tasks WHERE finished_ns IS NULL GROUP BY runner`)
	if err != nil {
		return r, s.unavailable("inspect", err)
	}
	defer rows.Close()
	for rows.Next() {
		var runner string
		var n int
		if err := rows.Scan(&runner, &n); err != nil {
			return r, s.unavailable("inspect", err)
		}
		up := runner == s.instance
		if !up {
			if up, err = alive(s.dir, runner); err != nil {
				return r, err
			}
		}
		r.Runners[runner] = store.RunnerState{Alive: up, Tasks: n}
		r.Unfinished += n
		if !up {
			r.Orphans += n
		}
	}
	if err := rows.Err(); err != nil {
		return r, s.unavailable("inspect", err)
	}
	if err := s.rs.QueryRowContext(ctx, `SELECT COUNT(*) FROM push_pending`).Scan(&r.Pending); err != nil {
		return r, s.unavailable("inspect", err)
	}
	if err := s.rs.QueryRowContext(ctx, `SELECT COUNT(*), coalesce(SUM(size), 0) FROM blobs`).Scan(&r.Blobs, &r.BlobBytes); err != nil {
		return r, s.unavailable("inspect", err)
	}
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(s.path + suffix); err == nil {
			r.Bytes += fi.Size()
		}
	}
	return r, nil
}

// Prune removes the tasks that finished before before (with their webhooks,
// pending notifications and stored distillates) and every expired stored
// distillate. Unfinished tasks are never touched.
func (s *Store) Prune(ctx context.Context, before time.Time) (store.Pruned, error) {
	var p store.Pruned
	cut := before.UnixNano()
	err := s.write(ctx, "prune", func(tx *wtx) error {
		res, err := tx.ExecContext(ctxBG, `DELETE FROM blobs WHERE (expires_ns IS NOT NULL AND expires_ns <= ?)
			OR owner IN (SELECT id FROM tasks WHERE rowid IN (`+finishedByCutSQL+`))`, s.now(), cut)
		if err != nil {
			return s.unavailable("prune", err)
		}
		n, _ := res.RowsAffected()
		p.Blobs = int(n)
		res, err = tx.ExecContext(ctxBG, `DELETE FROM tasks WHERE rowid IN (`+finishedByCutSQL+`)`, cut)
		if err != nil {
			return s.unavailable("prune", err)
		}
		n, _ = res.RowsAffected()
		p.Tasks = int(n)
		return nil
	})
	if err != nil {
		return store.Pruned{}, err
	}
	err = s.writeAlone(ctx, "prune", func(w *wtx) error {
		if _, err := w.ExecContext(ctxBG, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return s.unavailable("prune", err)
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	return p, nil
}
