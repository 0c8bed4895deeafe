package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

var _ tasks.StepStore = (*Store)(nil)

// AddSteps implements tasks.StepStore: in one write, after the task's
// steps so far (their count, bytes and whether the budget already ran out).
func (s *Store) AddSteps(ctx context.Context, root a2a.TaskID, recs []tasks.StepRecord, budget int64) error {
	if len(recs) == 0 {
		return nil
	}
	return s.write(ctx, "add steps", func(tx *wtx) error {
		var one int
		err := tx.QueryRowContext(ctxBG, `SELECT 1 FROM tasks WHERE id = ?`, string(root)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // not a task this store holds: its steps are not kept
		}
		if err != nil {
			return s.unavailable("add steps", err)
		}
		var seq, bytes, dropped int64
		err = tx.QueryRowContext(ctxBG, `SELECT coalesce(max(seq), 0), coalesce(sum(length(body)), 0), coalesce(max(kind = ?), 0) FROM steps WHERE task_id = ?`,
			api.StepDropped, string(root)).Scan(&seq, &bytes, &dropped)
		if err != nil {
			return s.unavailable("add steps", err)
		}
		for _, r := range recs {
			if dropped != 0 {
				return nil
			}
			kind, body := r.Kind, r.Body
			if bytes+int64(len(body)) > budget {
				kind, body, dropped = api.StepDropped, tasks.DroppedStep, 1
			}
			seq++
			bytes += int64(len(body))
			if _, err := tx.ExecContext(ctxBG, `INSERT INTO steps (task_id, seq, kind, body) VALUES (?, ?, ?, ?)`, string(root), seq, kind, body); err != nil {
				return s.unavailable("add steps", err)
			}
		}
		return nil
	})
}

// Steps implements tasks.StepStore.
func (s *Store) Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]tasks.StepRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rs.QueryContext(ctx, `SELECT seq, kind, body FROM steps WHERE task_id = ?1 AND seq > ?2 AND EXISTS (SELECT 1 FROM tasks WHERE id = ?1 AND (finished_ns IS NULL OR finished_ns > ?4)) ORDER BY seq LIMIT ?3`,
		string(root), after, limit, s.cutoff())
	if err != nil {
		return nil, s.unavailable("read steps", err)
	}
	defer rows.Close()
	var out []tasks.StepRecord
	for rows.Next() {
		var r tasks.StepRecord
		if err := rows.Scan(&r.Seq, &r.Kind, &r.Body); err != nil {
			return nil, s.unavailable("read steps", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read steps", err)
	}
	return out, nil
}
