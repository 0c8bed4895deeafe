package pgtest

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/testkit"
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

// A port taken between its pick and postgres's bind (by another test
// process) costs a second start on another port, not the test.
func TestStartAgainOnATakenPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	picks := 0
	freePort = func() (int, error) {
		picks++
		if picks == 1 {
			return taken, nil
		}
		return testkit.FreePort()
	}
	t.Cleanup(func() { freePort = testkit.FreePort })
	s := Start(t)
	if picks != 2 || s.Port() == taken {
		t.Fatalf("%d picks, port %d (the taken one %d)", picks, s.Port(), taken)
	}
	c, err := pgx.Connect(context.Background(), s.dsn("postgres"))
	if err != nil {
		t.Fatalf("on port %s: %v", strconv.Itoa(s.Port()), err)
	}
	c.Close(context.Background())
}
