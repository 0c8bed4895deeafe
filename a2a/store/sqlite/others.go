package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
)

// Other is another live instance of the store in the same state directory: a
// second agentd on it.
type Other struct {
	Instance string
	PID      int // as its lock file says; 0 when it says nothing readable
}

// Others returns the other live instances of this store's directory. Two
// agentd processes on one state directory share its tasks without sharing
// their runs: each runs and cancels only the tasks it accepted.
func (s *Store) Others() ([]Other, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, instancesDir))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list instances: %w", err)
	}
	var out []Other
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || id == s.instance {
			continue
		}
		up, err := alive(s.dir, id)
		if err != nil {
			return out, err
		}
		if !up {
			continue
		}
		o := Other{Instance: id}
		if b, err := os.ReadFile(filepath.Join(s.dir, instancesDir, e.Name())); err == nil {
			o.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		out = append(out, o)
	}
	return out, nil
}

// RunnerOf implements tasks.Elsewhere: the instance that runs the unfinished
// task id, and whether it is alive. It is "" for a finished or unknown task.
func (s *Store) RunnerOf(ctx context.Context, id a2a.TaskID) (string, bool, error) {
	var runner string
	err := s.r.QueryRowContext(ctx, `SELECT runner FROM tasks WHERE id = ? AND finished_ns IS NULL`, string(id)).Scan(&runner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("sqlite: runner of %s: %w", id, err)
	}
	if runner == s.instance {
		return runner, true, nil
	}
	up, err := alive(s.dir, runner)
	return runner, up, err
}

var _ tasks.Elsewhere = (*Store)(nil)
