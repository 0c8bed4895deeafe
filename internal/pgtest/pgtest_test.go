package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A started server answers queries, survives a stop and a restart with its
// data, and is gone after a kill.
func TestServer(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	dsn := s.Database(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	s.Stop()
	if _, err := pgx.Connect(ctx, dsn); err == nil {
		t.Fatal("a stopped server answers")
	}
	s.Restart(t)
	c, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var x int
	if err := c.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after a restart: %d %v", x, err)
	}
}
