package tasks

import (
	"context"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// auditTrail is the memory store's audit trail (Auditor), bounded by count
// and age as the Auditor says.
type auditTrail struct {
	keep   int           // records kept; <= 0: DefaultAuditKeep
	maxAge time.Duration // <= 0: DefaultAuditMaxAge
	mu     sync.Mutex    // guards recs, seq
	recs   []auditEntry  // oldest first
	seq    int64         // the last record's position
}

type auditEntry struct {
	seq int64
	at  time.Time // by the store's clock, for retention
	rec api.AuditRecord
}

// AuditBounds returns the retention of the audit trail of a store configured
// with keep and maxAge (their defaults for values <= 0).
func AuditBounds(keep int, maxAge time.Duration) (int, time.Duration) {
	if keep <= 0 {
		keep = DefaultAuditKeep
	}
	if maxAge <= 0 {
		maxAge = DefaultAuditMaxAge
	}
	return keep, maxAge
}

// AppendAudit implements Auditor.
func (s *MemoryStore) AppendAudit(_ context.Context, r api.AuditRecord) error {
	now := s.now()
	a := &s.audit
	keep, maxAge := AuditBounds(a.keep, a.maxAge)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	a.recs = append(a.recs, auditEntry{seq: a.seq, at: now, rec: CleanAudit(r)})
	drop := 0
	for drop < len(a.recs) && (len(a.recs)-drop > keep || a.recs[drop].at.Before(now.Add(-maxAge))) {
		drop++
	}
	if drop > 0 {
		a.recs = append(a.recs[:0:0], a.recs[drop:]...)
	}
	return nil
}

// ListAudit implements Auditor.
func (s *MemoryStore) ListAudit(_ context.Context, q api.AuditParams) (api.AuditResult, error) {
	before := int64(-1)
	if q.Before != "" {
		var err error
		if before, err = ParseAuditCursor(q.Before); err != nil {
			return api.AuditResult{}, err
		}
	}
	res := api.AuditResult{Records: []api.AuditRecord{}}
	if !Storable(q.Method) || !Storable(q.Caller) {
		return res, nil
	}
	now := s.now()
	a := &s.audit
	_, maxAge := AuditBounds(a.keep, a.maxAge)
	a.mu.Lock()
	defer a.mu.Unlock()
	var last int64
	for i := len(a.recs) - 1; i >= 0; i-- {
		e := a.recs[i]
		if before >= 0 && e.seq >= before || e.at.Before(now.Add(-maxAge)) ||
			q.Method != "" && e.rec.Method != q.Method || q.Caller != "" && e.rec.Caller != q.Caller {
			continue
		}
		if len(res.Records) == q.Limit {
			res.Next = AuditCursor(last)
			break
		}
		res.Records = append(res.Records, e.rec)
		last = e.seq
	}
	return res, nil
}
