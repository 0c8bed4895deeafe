package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd/agentd/store"
	"github.com/agentd/agentd/tasks"
	"github.com/agentd/agentd/tasks/storetest"
)

func open(t *testing.T, dir string, cfg storetest.Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, Options{Capacity: cfg.Capacity, Retention: cfg.Retention, Now: cfg.Clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The embedded store passes the conformance suite, reopened as a new
// instance for the durable tests.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, cfg storetest.Config) tasks.Store { return open(t, t.TempDir(), cfg) },
		Reopen: func(t *testing.T, s tasks.Store, cfg storetest.Config) tasks.Store {
			old := s.(*Store)
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, old.dir, cfg)
		},
	})
}

// A database a newer agentd wrote is refused, naming both versions, and left
// as it is.
func TestSchemaNewer(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, storetest.Config{})
	if _, err := s.w.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), dir, Options{})
	var se *store.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrSchemaNewer) || se.Found != 99 || se.Max != SchemaVersion {
		t.Fatalf("open: %v", err)
	}
	t.Log(err)
}

// A state directory that cannot be written is refused at Open.
func TestReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only directory")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), dir, Options{}); !errors.Is(err, ErrStateDir) {
		t.Fatalf("open: %v", err)
	}
}
