package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

// auditOf opens a store of b as a tasks.Auditor with cfg's audit bounds, on
// a clock of its own; the test is skipped when the store keeps no trail.
func auditOf(t *testing.T, b Backend, cfg Config) (*clock, tasks.Store, tasks.Auditor) {
	t.Helper()
	c := newClock()
	cfg.Clock = c.now
	s := b.Open(t, cfg)
	a, ok := s.(tasks.Auditor)
	if !ok {
		t.Skip("the store keeps no audit trail (tasks.Auditor)")
	}
	return c, s, a
}

// listAll follows the pages of q from the first to the last.
func listAll(t *testing.T, a tasks.Auditor, q api.AuditParams) ([]api.AuditRecord, int) {
	t.Helper()
	var out []api.AuditRecord
	pages := 0
	for {
		res, err := a.ListAudit(ctx, q)
		must(t, err)
		pages++
		if len(res.Records) > q.Limit {
			t.Fatalf("a page of %d records, limit %d", len(res.Records), q.Limit)
		}
		out = append(out, res.Records...)
		if res.Next == "" {
			return out, pages
		}
		if pages > 100 {
			t.Fatal("the pages do not end")
		}
		q.Before = res.Next
	}
}

func methods(rs []api.AuditRecord) string {
	s := ""
	for _, r := range rs {
		s += r.Method + ":" + r.Caller + " "
	}
	return s
}

// The audit trail lists its records newest first, paged by an opaque
// cursor, filtered by method and caller exactly; hostile filter text (SQL
// quoting and wildcards, a NUL, invalid UTF-8) matches nothing and breaks
// nothing; a cursor the store did not issue is invalid params; text no
// store can hold is stored cleaned; a durable store's trail outlives it.
func testAudit(t *testing.T, b Backend) {
	c, s, a := auditOf(t, b, Config{})
	at := c.now()
	for i := range 7 {
		caller := "token:alice"
		if i%2 == 1 {
			caller = "spiffe://example.org/ops"
		}
		must(t, a.AppendAudit(ctx, api.AuditRecord{Time: at.Add(time.Duration(i) * time.Second), Caller: caller,
			Method: fmt.Sprintf("a2a.M%d", i%3), Target: fmt.Sprintf("t%d", i), Outcome: "ok", Instance: "i1"}))
	}
	all, pages := listAll(t, a, api.AuditParams{Limit: 3})
	if len(all) != 7 || pages != 3 {
		t.Fatalf("%d records in %d pages, want 7 in 3: %s", len(all), pages, methods(all))
	}
	for i, r := range all {
		want := 6 - i
		if r.Target != fmt.Sprintf("t%d", want) || !r.Time.Equal(at.Add(time.Duration(want)*time.Second)) || r.Instance != "i1" || r.Outcome != "ok" {
			t.Fatalf("record %d: %+v, want the record t%d (newest first)", i, r, want)
		}
	}
	byMethod, _ := listAll(t, a, api.AuditParams{Limit: 2, Method: "a2a.M0"})
	if methods(byMethod) != "a2a.M0:token:alice a2a.M0:spiffe://example.org/ops a2a.M0:token:alice " {
		t.Fatalf("method a2a.M0: %s", methods(byMethod))
	}
	byCaller, _ := listAll(t, a, api.AuditParams{Limit: 10, Caller: "spiffe://example.org/ops"})
	if len(byCaller) != 3 {
		t.Fatalf("caller spiffe://example.org/ops: %s", methods(byCaller))
	}
	both, _ := listAll(t, a, api.AuditParams{Limit: 10, Caller: "token:alice", Method: "a2a.M1"})
	if methods(both) != "a2a.M1:token:alice " {
		t.Fatalf("caller and method: %s", methods(both))
	}
	for _, bad := range []string{"' OR '1'='1", "a2a.%", "_", "a2a.M0' --", "\x00", "a\xffb", `a2a.M0"`} {
		for _, q := range []api.AuditParams{{Limit: 10, Method: bad}, {Limit: 10, Caller: bad}} {
			res, err := a.ListAudit(ctx, q)
			if err != nil || len(res.Records) != 0 || res.Next != "" {
				t.Fatalf("filter %+v: %d records, next %q, err %v; want none", q, len(res.Records), res.Next, err)
			}
		}
	}
	for _, bad := range []string{"x", "0", "audit.1", tasks.AuditCursor(3) + "=", "' OR 1=1 --", "\x00"} {
		_, err := a.ListAudit(ctx, api.AuditParams{Limit: 10, Before: bad})
		if !errors.Is(err, tasks.ErrAuditCursor) || !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("before %q: %v, want tasks.ErrAuditCursor and a2a.ErrInvalidParams", bad, err)
		}
	}
	must(t, a.AppendAudit(ctx, api.AuditRecord{Time: at, Caller: "token:a\x00b", Method: "a2a.Caps", Outcome: "error", Detail: "bad \xff value"}))
	res, err := a.ListAudit(ctx, api.AuditParams{Limit: 1})
	must(t, err)
	if len(res.Records) != 1 || res.Records[0].Caller != "token:a\uFFFDb" || res.Records[0].Detail != "bad \uFFFD value" {
		t.Fatalf("unstorable text: %+v, want it cleaned", res.Records)
	}
	if b.Reopen == nil {
		return
	}
	again := b.Reopen(t, s, Config{Clock: c.now}).(tasks.Auditor)
	after, _ := listAll(t, again, api.AuditParams{Limit: 100})
	if len(after) != 8 || after[1].Target != "t6" {
		t.Fatalf("after a reopen: %d records (%s), want the 8 appended", len(after), methods(after))
	}
}

// The audit trail keeps at most AuditKeep records, the newest, and none
// older than AuditMaxAge by the store's clock: the retention declared.
func testAuditRetention(t *testing.T, b Backend) {
	c, _, a := auditOf(t, b, Config{AuditKeep: 3, AuditMaxAge: time.Hour})
	for i := range 5 {
		must(t, a.AppendAudit(ctx, api.AuditRecord{Time: c.now(), Caller: "token:a", Method: "a2a.Pause", Target: fmt.Sprint(i), Outcome: "ok"}))
	}
	got, _ := listAll(t, a, api.AuditParams{Limit: 10})
	if len(got) != 3 || got[0].Target != "4" || got[2].Target != "2" {
		t.Fatalf("after 5 appends with AuditKeep 3: %+v, want the newest 3", got)
	}
	c.add(time.Hour + time.Second)
	if got, _ := listAll(t, a, api.AuditParams{Limit: 10}); len(got) != 0 {
		t.Fatalf("after the max age: %d records, want none", len(got))
	}
	must(t, a.AppendAudit(ctx, api.AuditRecord{Time: c.now(), Caller: "token:a", Method: "a2a.Resume", Outcome: "ok"}))
	if got, _ := listAll(t, a, api.AuditParams{Limit: 10}); len(got) != 1 || got[0].Method != "a2a.Resume" {
		t.Fatalf("after an append past the max age: %+v, want only it", got)
	}
}
