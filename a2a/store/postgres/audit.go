package postgres

import (
	"context"
	"time"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

var _ tasks.Auditor = (*Store)(nil)

// AppendAudit implements tasks.Auditor: the record and the deletion of the
// records beyond the retention commit in one statement (whose deletion does
// not see the row it adds: it keeps AuditKeep-1 others); every replica
// reads it.
func (s *Store) AppendAudit(ctx context.Context, r api.AuditRecord) error {
	r = tasks.CleanAudit(r)
	keep, maxAge := tasks.AuditBounds(s.opts.AuditKeep, s.opts.AuditMaxAge)
	now := s.now()
	_, err := s.pool.Exec(ctx, `WITH added AS (
			INSERT INTO audit (at_ns, time_ns, caller, method, target, outcome, detail, instance) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		)
		DELETE FROM audit WHERE at_ns < $9 OR seq <= (SELECT seq FROM audit ORDER BY seq DESC LIMIT 1 OFFSET $10)`,
		now, r.Time.UnixNano(), r.Caller, r.Method, r.Target, r.Outcome, r.Detail, r.Instance, now-int64(maxAge), keep-1)
	if err != nil {
		return s.unavailable("append audit record", err)
	}
	return nil
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
	rows, err := s.pool.Query(ctx, `SELECT seq, time_ns, caller, method, target, outcome, detail, instance FROM audit
		WHERE seq < $1 AND at_ns >= $2 AND ($3 = '' OR method = $3) AND ($4 = '' OR caller = $4) ORDER BY seq DESC LIMIT $5`,
		before, s.now()-int64(maxAge), q.Method, q.Caller, q.Limit+1)
	if err != nil {
		return res, s.unavailable("list audit trail", err)
	}
	defer rows.Close()
	var last int64
	for rows.Next() {
		if len(res.Records) == q.Limit {
			res.Next = tasks.AuditCursor(last)
			break
		}
		var r api.AuditRecord
		var ns int64
		if err := rows.Scan(&last, &ns, &r.Caller, &r.Method, &r.Target, &r.Outcome, &r.Detail, &r.Instance); err != nil {
			return api.AuditResult{}, s.unavailable("list audit trail", err)
		}
		r.Time = time.Unix(0, ns).UTC()
		res.Records = append(res.Records, r)
	}
	if err := rows.Err(); err != nil {
		return api.AuditResult{}, s.unavailable("list audit trail", err)
	}
	return res, nil
}
