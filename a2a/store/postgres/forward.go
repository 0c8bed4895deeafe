package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/tasks"
)

var _ tasks.Forwarder = (*Store)(nil)

// Forward implements tasks.Forwarder: the message is a row of forwarded
// (migration 10), and agentd_forward tells every replica its task's id.
func (s *Store) Forward(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (int64, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return 0, fmt.Errorf("forward a message to task %s: %w: %v", id, a2a.ErrInvalidParams, err)
	}
	var seq int64
	err = s.pool.QueryRow(ctx, `WITH n AS (SELECT pg_notify('agentd_forward', $1))
		INSERT INTO forwarded (task_id, message) SELECT $1, $2 FROM n RETURNING seq`, string(id), b).Scan(&seq)
	if err != nil {
		return 0, s.unavailable("forward a message to task "+string(id), err)
	}
	return seq, nil
}

// Renotify implements tasks.Forwarder.
func (s *Store) Renotify(ctx context.Context, id a2a.TaskID) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify('agentd_forward', $1)`, string(id)); err != nil {
		return s.unavailable("renotify task "+string(id)+"'s forwarded messages", err)
	}
	return nil
}

// Forwarded implements tasks.Forwarder.
func (s *Store) Forwarded() <-chan a2a.TaskID { return s.forwards }

// announceForward delivers a task's forwarded message on forwards (id "":
// some may have been missed). The listener never waits for a reader: an
// announcement that finds the channel full is dropped and "" is owed.
func (s *Store) announceForward(id a2a.TaskID) {
	if s.forwardLost.Load() {
		select {
		case s.forwards <- "":
			s.forwardLost.Store(false)
		default:
			return
		}
		if id == "" {
			return
		}
	}
	select {
	case s.forwards <- id:
	default:
		s.forwardLost.Store(true)
	}
}

// PendingForwards implements tasks.Forwarder.
func (s *Store) PendingForwards(ctx context.Context, id a2a.TaskID) ([]tasks.ForwardedMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, message FROM forwarded WHERE task_id = $1 AND refusal_code IS NULL ORDER BY seq`, string(id))
	if err != nil {
		return nil, s.unavailable("read task "+string(id)+"'s forwarded messages", err)
	}
	var out []tasks.ForwardedMessage
	for rows.Next() {
		var fm tasks.ForwardedMessage
		var b []byte
		if err := rows.Scan(&fm.Seq, &b); err != nil {
			return nil, s.unavailable("read task "+string(id)+"'s forwarded messages", err)
		}
		var m a2a.Message
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("read task %s's forwarded message %d: %w", id, fm.Seq, err)
		}
		fm.Message = &m
		out = append(out, fm)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read task "+string(id)+"'s forwarded messages", err)
	}
	return out, nil
}

// SettleForward implements tasks.Forwarder: the task's watchers are told
// on agentd_task, as a write of the task tells them.
func (s *Store) SettleForward(ctx context.Context, id a2a.TaskID, seq int64, refusal *tasks.ForwardRefusal) error {
	var err error
	if refusal == nil {
		_, err = s.pool.Exec(ctx, `WITH d AS (DELETE FROM forwarded WHERE seq = $1) SELECT pg_notify('agentd_task', $2)`, seq, string(id))
	} else {
		_, err = s.pool.Exec(ctx, `WITH u AS (UPDATE forwarded SET refusal_code = $2, refusal_text = $3 WHERE seq = $1) SELECT pg_notify('agentd_task', $4)`,
			seq, refusal.Code, refusal.Text, string(id))
	}
	if err != nil {
		return s.unavailable("settle a message forwarded to task "+string(id), err)
	}
	return nil
}

// ForwardOutcome implements tasks.Forwarder.
func (s *Store) ForwardOutcome(ctx context.Context, seq int64) (*tasks.ForwardRefusal, bool, error) {
	var code, text *string
	err := s.pool.QueryRow(ctx, `SELECT refusal_code, refusal_text FROM forwarded WHERE seq = $1`, seq).Scan(&code, &text)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.unavailable("read a forwarded message's outcome", err)
	}
	if code == nil {
		return nil, true, nil
	}
	r := &tasks.ForwardRefusal{Code: *code}
	if text != nil {
		r.Text = *text
	}
	return r, true, nil
}

// DropForward implements tasks.Forwarder.
func (s *Store) DropForward(ctx context.Context, seq int64) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM forwarded WHERE seq = $1`, seq); err != nil {
		return s.unavailable("delete a forwarded message", err)
	}
	return nil
}
