package postgres

import (
	"context"
	"errors"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

var _ tasks.StepStore = (*Store)(nil)

// AddSteps implements tasks.StepStore in one transaction, which holds the
// tree's advisory lock (two writers of one tree take turns) and the task's
// row against its deletion (the foreign key).
func (s *Store) AddSteps(ctx context.Context, root a2a.TaskID, recs []tasks.StepRecord, budget int64) error {
	if len(recs) == 0 || !tasks.Storable(string(root)) {
		return nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.unavailable("add steps", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM tasks WHERE id = $1 FOR KEY SHARE`, string(root)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // not a task this store holds: its steps are not kept
	}
	if err != nil {
		return s.unavailable("add steps", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 8))`, string(root)); err != nil {
		return s.unavailable("add steps", err)
	}
	var seq, bytes int64
	var dropped bool
	err = tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0), coalesce(sum(octet_length(body)), 0), coalesce(bool_or(kind = $2), false) FROM steps WHERE task_id = $1`,
		string(root), api.StepDropped).Scan(&seq, &bytes, &dropped)
	if err != nil {
		return s.unavailable("add steps", err)
	}
	batch := &pgx.Batch{}
	for _, r := range recs {
		if dropped {
			break
		}
		kind, body := r.Kind, r.Body
		if bytes+int64(len(body)) > budget {
			kind, body, dropped = api.StepDropped, tasks.DroppedStep, true
		}
		seq++
		bytes += int64(len(body))
		batch.Queue(`INSERT INTO steps (task_id, seq, kind, body) VALUES ($1, $2, $3, $4)`, string(root), seq, kind, body)
	}
	if batch.Len() > 0 {
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return s.unavailable("add steps", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return s.unavailable("add steps", err)
	}
	return nil
}

// Steps implements tasks.StepStore.
func (s *Store) Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]tasks.StepRecord, error) {
	if limit <= 0 || !tasks.Storable(string(root)) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, kind, body FROM steps WHERE task_id = $1 AND seq > $2 AND EXISTS (SELECT 1 FROM tasks WHERE id = $1 AND (finished_ns IS NULL OR finished_ns > $4)) ORDER BY seq LIMIT $3`,
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
