package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/store"
	"github.com/agentd/agentd/tasks"
	"github.com/agentd/agentd/tasks/storetest"
)

func open(t *testing.T, dsn string, cfg storetest.Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{Capacity: cfg.Capacity, Retention: cfg.Retention, Now: cfg.Clock, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The PostgreSQL store passes the conformance suite, each test on a database
// of its own of one real server; a reopen is the next replica.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	dsns := map[*Store]string{}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, cfg storetest.Config) tasks.Store {
			dsn := srv.Database(t)
			s := open(t, dsn, cfg)
			dsns[s] = dsn
			return s
		},
		Reopen: func(t *testing.T, old tasks.Store, cfg storetest.Config) tasks.Store {
			s := old.(*Store)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			next := open(t, dsns[s], cfg)
			dsns[next] = dsns[s]
			return next
		},
	})
}

// A database a newer agentd wrote is refused and left as it is; a database
// that cannot be reached or written is ErrUnreachable.
func TestOpenRefusals(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.Database(t)
	open(t, dsn, storetest.Config{}).Close()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "UPDATE agentd_schema SET version = 9"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, dsn, Options{})
	var se *store.SchemaError
	if !errors.As(err, &se) || se.Found != 9 {
		t.Fatalf("newer schema: %v", err)
	}
	ro := srv.Database(t)
	c2, _ := pgx.Connect(ctx, ro)
	c2.Exec(ctx, "ALTER DATABASE "+c2.Config().Database+" SET default_transaction_read_only = on")
	c2.Close(ctx)
	if _, err := Open(ctx, ro, Options{}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("read-only database: %v", err)
	}
	srv.Stop()
	if _, err := Open(ctx, dsn, Options{}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("stopped server: %v", err)
	}
}

// BenchmarkSend is a send's writes (Create, then the completed Put) on a
// durable server (fsync and synchronous commits on) holding 10000 finished
// tasks, one sender and 16 at once.
func BenchmarkSend(b *testing.B) {
	srv, err := pgtest.New(pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprint("conc", conc), func(b *testing.B) {
			dsn, err := srv.NewDatabase()
			if err != nil {
				b.Fatal(err)
			}
			s, err := Open(context.Background(), dsn, Options{Capacity: 400000, Retention: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchSend(b, s, 2000, conc)
		})
	}
}
