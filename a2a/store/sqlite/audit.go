package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

var _ tasks.Auditor = (*Store)(nil)

// AppendAudit implements tasks.Auditor: the record and the deletion of the
// records beyond the retention commit in one transaction.
func (s *Store) AppendAudit(ctx context.Context, r api.AuditRecord) error {
	r = tasks.CleanAudit(r)
	keep, maxAge := tasks.AuditBounds(s.opts.AuditKeep, s.opts.AuditMaxAge)
	now := s.now()
	return s.write(ctx, "append audit record", func(tx *wtx) error {
		if _, err := tx.ExecContext(ctxBG, `INSERT INTO audit (at_ns, time_ns, caller, method, target, outcome, detail, instance) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			now, r.Time.UnixNano(), r.Caller, r.Method, r.Target, r.Outcome, r.Detail, r.Instance); err != nil {
			return s.unavailable("append audit record", err)
		}
		if _, err := tx.ExecContext(ctxBG, `DELETE FROM audit WHERE at_ns < ? OR seq <= (SELECT seq FROM audit ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
			now-int64(maxAge), keep); err != nil {
			return s.unavailable("prune audit trail", err)
		}
		return nil
	})
}

// ListAudit implements tasks.Auditor.
func (s *Store) ListAudit(ctx context.Context, q api.AuditParams) (api.AuditResult, error) {
	res := api.AuditResult{Records: []api.AuditRecord{}}
	before := int64(1<<63 - 1)
	if q.Before != "" {
		var err error
		if before, err = tasks.ParseAuditCursor(q.Before); err != nil {
			return res, err
		}
	}
	if !tasks.Storable(q.Method) || !tasks.Storable(q.Caller) {
		return res, nil
	}
	_, maxAge := tasks.AuditBounds(s.opts.AuditKeep, s.opts.AuditMaxAge)
	rows, err := s.r.QueryContext(ctx, `SELECT seq, time_ns, caller, method, target, outcome, detail, instance FROM audit
		WHERE seq < ?1 AND at_ns >= ?2 AND (?3 = '' OR method = ?3) AND (?4 = '' OR caller = ?4) ORDER BY seq DESC LIMIT ?5`,
		before, s.now()-int64(maxAge), q.Method, q.Caller, q.Limit+1)
	if err != nil {
		return res, s.unavailable("list audit trail", err)
	}
	defer rows.Close()
	return scanAudit(rows, q.Limit, func(err error) error { return s.unavailable("list audit trail", err) })
}

// scanAudit reads up to limit records of rows (one more says there is a next
// page).
func scanAudit(rows *sql.Rows, limit int, fail func(error) error) (api.AuditResult, error) {
	res := api.AuditResult{Records: []api.AuditRecord{}}
	var last int64
	for rows.Next() {
		if len(res.Records) == limit {
			res.Next = tasks.AuditCursor(last)
			break
		}
		var r api.AuditRecord
		var ns int64
		if err := rows.Scan(&last, &ns, &r.Caller, &r.Method, &r.Target, &r.Outcome, &r.Detail, &r.Instance); err != nil {
			return api.AuditResult{}, fail(err)
		}
		r.Time = time.Unix(0, ns).UTC()
		res.Records = append(res.Records, r)
	}
	if err := rows.Err(); err != nil {
		return api.AuditResult{}, fail(err)
	}
	return res, nil
}
