package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// The state directory and the database's files are their owner's alone:
// a new directory is made 0700 and agentd.db, -wal and -shm 0600 whatever
// the umask lets through; an existing directory and files open to others
// are tightened, with a warning naming each and its old mode.
func TestStateDirPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	check := func(t *testing.T, dir string) {
		t.Helper()
		want := map[string]os.FileMode{dir: 0o700, filepath.Join(dir, FileName): 0o600,
			filepath.Join(dir, FileName+"-wal"): 0o600, filepath.Join(dir, FileName+"-shm"): 0o600}
		for path, mode := range want {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), mode)
			}
		}
	}
	write := func(t *testing.T, s *Store) {
		t.Helper()
		if err := s.Create(ctx, task("t1", a2a.TaskStateSubmitted, "m1"), ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("new", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		s, err := Open(ctx, dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		write(t, s)
		check(t, dir)
	})

	t.Run("open to others", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		s, err := Open(ctx, dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		write(t, s)
		// Kept open: its -wal and -shm stay, to be found open too.
		for _, p := range []string{FileName, FileName + "-wal", FileName + "-shm"} {
			if err := os.Chmod(filepath.Join(dir, p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		s2, err := Open(ctx, dir, Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		s.Close()
		check(t, dir)
		for _, line := range []string{
			fmt.Sprintf(`"path":%q,"mode":"0755","now":"0700"`, dir),
			fmt.Sprintf(`"path":%q,"mode":"0644","now":"0600"`, filepath.Join(dir, FileName)),
			fmt.Sprintf(`"path":%q,"mode":"0644","now":"0600"`, filepath.Join(dir, FileName+"-wal")),
		} {
			if !strings.Contains(logs.String(), line) {
				t.Errorf("no warning with %s in:\n%s", line, logs.String())
			}
		}
	})
}
