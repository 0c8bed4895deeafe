package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/store"
	"github.com/jackc/pgx/v5"
)

// pgCPU sums the CPU ticks of the postmaster on port and its children.
func pgCPU(port int) time.Duration {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pm string
	stats := map[string][]string{}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+2:])
		pid := strings.Fields(s)[0]
		stats[pid] = f
		if strings.Contains(s, "(postgres)") {
			c, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			if strings.Contains(string(c), "-p\x00"+strconv.Itoa(port)+"\x00") {
				pm = pid
			}
		}
	}
	var ticks int64
	for pid, f := range stats {
		if pid == pm || f[1] == pm {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func storeEncode(t *a2a.Task) ([]byte, error) { return store.EncodeTask(t) }

func TestScratchCPU(t *testing.T) {
	srv, err := pgtest.New(pgtest.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dsn, _ := srv.NewDatabase()
	ctx := context.Background()
	s, err := Open(ctx, dsn, Options{Capacity: 400000, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mk := func(i int, st a2a.TaskState) *a2a.Task {
		ts := time.Now()
		id := a2a.TaskID(fmt.Sprint("t", i))
		msg := &a2a.Message{ID: string(id), Role: a2a.MessageRoleUser, TaskID: id, ContextID: "c", Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}
		return &a2a.Task{ID: id, ContextID: "c", History: []*a2a.Message{msg}, Status: a2a.TaskStatus{State: st, Timestamp: &ts}}
	}
	const n = 2000
	for i := range n {
		s.Create(ctx, mk(i, a2a.TaskStateSubmitted), "o")
		s.PutFinal(ctx, mk(i, a2a.TaskStateCompleted))
	}
	measure := func(name string, f func(i int)) {
		p0 := pgCPU(srv.Port())
		st := time.Now()
		for i := range n {
			f(i)
		}
		t.Logf("%-30s %8v wall, %8v pg CPU", name, time.Since(st)/n, (pgCPU(srv.Port())-p0)/n)
	}
	if d := os.Getenv("DISABLE"); d != "" {
		c, _ := pgx.Connect(ctx, dsn)
		if _, err := c.Exec(ctx, "ALTER TABLE tasks DISABLE TRIGGER "+d); err != nil {
			t.Fatal(err)
		}
		c.Close(ctx)
	}
	base := n
	measure("create", func(i int) {
		if err := s.Create(ctx, mk(base+i, a2a.TaskStateSubmitted), "o"); err != nil {
			t.Fatal(err)
		}
	})
	measure("putfinal", func(i int) {
		if _, err := s.PutFinal(ctx, mk(base+i, a2a.TaskStateCompleted)); err != nil {
			t.Fatal(err)
		}
	})
	base += n
	measure("create x8 batch (per create)", func(i int) {
		if i%8 != 0 {
			return
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
		for j := range 8 {
			tk := mk(base+i+j, a2a.TaskStateSubmitted)
			snap, _ := storeEncode(tk)
			b.Queue(makeRoomSQL, s.makeRoomArgs("o", string(tk.ID), int64(len(snap)))...)
			b.Queue(`INSERT INTO tasks (id, owner, message_id, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, string(tk.ID), "o", string(tk.ID), "c", "submitted", 1, 1, nil, s.instance, snap, len(snap))
		}
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	})
	measure("putfinal x8 batch (per put)", func(i int) {
		if i%8 != 0 {
			return
		}
		b := &pgx.Batch{}
		for j := range 8 {
			tk := mk(base+i+j, a2a.TaskStateCompleted)
			snap, _ := storeEncode(tk)
			b.Queue(`UPDATE tasks SET state = $1, updated_ns = $2, context_id = $3, snapshot = $4,
		size = octet_length($4::bytea) + coalesce(octet_length(payload), 0),
		finished_ns = CASE WHEN $5::bigint IS NULL THEN NULL ELSE coalesce(finished_ns, $5::bigint) END
		WHERE id = $6 AND (finished_ns IS NULL OR finished_ns > $7)`, "completed", 2, "c", snap, int64(5), string(tk.ID), s.cutoff())
			b.Queue(`SELECT EXISTS (SELECT 1 FROM push_configs WHERE task_id = $1)`, string(tk.ID))
		}
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	})
	c, _ := pgx.Connect(ctx, dsn)
	measure("select1", func(i int) { c.Exec(ctx, "SELECT 1") })
	measure("makeroom", func(i int) { c.Exec(ctx, makeRoomSQL, s.makeRoomArgs("o", "x", 100)...) })
	measure("sum", func(i int) { c.Exec(ctx, "SELECT sum(n), sum(bytes) FROM task_count") })
	c.Exec(ctx, "SET synchronous_commit = off")
	measure("update count async", func(i int) { c.Exec(ctx, "UPDATE task_count SET n = n + 0 WHERE shard = 3") })
	measure("insert async", func(i int) {
		c.Exec(ctx, `INSERT INTO tasks (id, owner, message_id, context_id, state, updated_ns, created_ns, runner, snapshot, size) VALUES ($1, 'o', $1, 'c', 'submitted', 1, 1, 'r', '\x00', 1)`, fmt.Sprint("x", i))
	})
	c.Exec(ctx, "SET synchronous_commit = on")
	measure("update count sync", func(i int) { c.Exec(ctx, "UPDATE task_count SET n = n + 0 WHERE shard = 3") })
}
