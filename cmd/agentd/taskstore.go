package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/store/postgres"
	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/secretfile"
)

// Store kinds (--store).
const (
	storeMemory   = "memory"
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// envStoreDSN is the PostgreSQL DSN's environment variable: a DSN holds a
// password, so it is never a flag.
const envStoreDSN = "AGENT_STORE_DSN"

// storeConfig is where a command keeps state that outlives it: the task
// store (serve) and the state directory, which holds the embedded store's
// database and the schedule mode's last tick. The DSN of PostgreSQL comes from
// the environment or a file, never argv.
type storeConfig struct {
	Kind     string        // --store: memory, sqlite or postgres; "" for run (the state directory's when set)
	StateDir string        // --state-dir
	DSNFile  string        // --store-dsn-file
	DSN      string        // AGENT_STORE_DSN
	Recover  string        // --recover: fail or rerun
	Lease    time.Duration // --store-lease: a PostgreSQL replica's lease
	Wait     time.Duration // --store-wait: how long a request waits for an unavailable store
}

// Bounds of --store-lease.
const (
	minStoreLease = 300 * time.Millisecond
	maxStoreLease = 10 * time.Minute
)

// Bounds of --store-wait.
const (
	minStoreWait = 100 * time.Millisecond
	maxStoreWait = 10 * time.Minute
)

// defaultStateDir is the per-user state directory: $XDG_STATE_HOME/agentd,
// else ~/.local/state/agentd; "" when neither is known (then --state-dir
// must be given).
func defaultStateDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "agentd")
	}
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) && h != "/" {
		return filepath.Join(h, ".local", "state", "agentd")
	}
	return ""
}

// addStore defines the store flags of serve (--store, --store-dsn-file and
// a per-user default state directory) and of run (the state directory only
// when given).
func addStore(f *cli.Flags, c *storeConfig, serve bool) {
	if serve {
		f.EnvString(&c.Kind, "store", "AGENT_STORE", storeSQLite, "the task store: sqlite (in --state-dir; tasks survive a restart), memory (lost with the process), or postgres (several replicas on one database; the DSN from "+envStoreDSN+" or --store-dsn-file)")
		f.EnvString(&c.StateDir, "state-dir", "AGENT_STATE_DIR", defaultStateDir(), "the state directory: the sqlite store's database ("+sqlite.FileName+") and the schedule mode's last tick (schedule.json)")
		f.EnvString(&c.DSNFile, "store-dsn-file", "AGENT_STORE_DSN_FILE", "", "--store postgres: a file holding the PostgreSQL DSN (or set "+envStoreDSN+"; never on argv)")
		f.EnvDuration(&c.Lease, "store-lease", "AGENT_STORE_LEASE", postgres.DefaultLeaseTTL, "--store postgres: a replica's lease; the tasks of a replica that has not renewed it for this long are resolved by another (--recover)")
		f.EnvDuration(&c.Wait, "store-wait", "AGENT_STORE_WAIT", tasks.DefaultStoreWait, "how long a request waits for an unavailable task store before it is answered -32000 (the store is unavailable; retry later); a running task's own writes are retried longer, in the background")
	} else {
		f.EnvString(&c.StateDir, "state-dir", "AGENT_STATE_DIR", "", "a state directory: with --run-id, a run that completed is not run again (its stored result is printed, and its code is the exit code); the schedule mode keeps its last tick there (schedule.json)")
	}
	f.EnvString(&c.Recover, "recover", "AGENT_RECOVER", string(tasks.RecoverFail), "what a restart does with a task whose process tree was lost: fail (failed, agentd/status crashed, cause supervisor_lost) or rerun (its root runs again once from the retained payload, same task id, agentd/attempt 2)")
	c.DSN = os.Getenv(envStoreDSN)
}

// Validate checks the store settings, naming the bad one. It reads no file.
func (c *storeConfig) Validate() error {
	if _, err := tasks.ParseRecoverPolicy(c.Recover); err != nil {
		return fmt.Errorf("--recover %q: want fail or rerun", c.Recover)
	}
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		if _, err := filepath.Abs(c.StateDir); err != nil {
			return fmt.Errorf("--state-dir %q: %v", c.StateDir, err)
		}
	}
	if strings.ContainsAny(c.StateDir, "?#") {
		return fmt.Errorf("--state-dir %q: the path may not hold ? or #", c.StateDir)
	}
	if c.Kind != "" && (c.Wait < minStoreWait || c.Wait > maxStoreWait) {
		return fmt.Errorf("--store-wait must be in [%s, %s] (got %s)", minStoreWait, maxStoreWait, c.Wait)
	}
	if c.Kind == storePostgres && (c.Lease < minStoreLease || c.Lease > maxStoreLease) {
		return fmt.Errorf("--store-lease must be in [%s, %s] (got %s)", minStoreLease, maxStoreLease, c.Lease)
	}
	switch c.Kind {
	case "":
	case storeMemory:
		if c.DSNFile != "" {
			return errors.New("--store-dsn-file is a setting of --store postgres, and the store is memory")
		}
	case storeSQLite:
		if c.StateDir == "" {
			return errors.New("--store sqlite needs --state-dir (no per-user default: set XDG_STATE_HOME or HOME, or pass --state-dir)")
		}
		if c.DSNFile != "" {
			return errors.New("--store-dsn-file is a setting of --store postgres, and the store is sqlite")
		}
	case storePostgres:
		if c.DSN == "" && c.DSNFile == "" {
			return fmt.Errorf("--store postgres needs the DSN in %s or --store-dsn-file", envStoreDSN)
		}
		if c.DSN != "" && c.DSNFile != "" {
			return fmt.Errorf("--store-dsn-file and %s are both set: give one", envStoreDSN)
		}
	default:
		if strings.Contains(c.Kind, "://") {
			return fmt.Errorf("--store: a DSN on the command line would show its password to every user of the machine: pass --store postgres with %s or --store-dsn-file", envStoreDSN)
		}
		return fmt.Errorf("--store %q: want sqlite, memory or postgres", c.Kind)
	}
	return nil
}

// policy is --recover (checked by Validate).
func (c *storeConfig) policy() tasks.RecoverPolicy {
	p, _ := tasks.ParseRecoverPolicy(c.Recover)
	return p
}

// stateDir returns --state-dir as an absolute path, creating it (the
// build's step); "" when none is set.
func (c *storeConfig) stateDir() (string, error) {
	if c.StateDir == "" {
		return "", nil
	}
	dir, err := filepath.Abs(c.StateDir)
	if err != nil {
		return "", cli.UsageError("--state-dir %s: %v", c.StateDir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", cli.UsageError("--state-dir %s: %v", c.StateDir, err)
	}
	return dir, nil
}

// storeLimits bound the tasks a store holds (--task-capacity,
// --task-retention); memory, when set, is serve's whole budget (the bytes and
// the per-caller quotas too), which every store keeps.
type storeLimits struct {
	capacity  int
	retention time.Duration
	memory    tasks.MemoryLimits
}

// openStore opens the task store c names (the build's step); instance names
// a PostgreSQL replica ("" for a new id). A store that cannot be opened at
// start (a state directory that cannot be written, a database a newer agentd
// wrote, a database that cannot be reached or written) is bad config: exit
// 2, naming the setting.
func openStore(ctx context.Context, c *storeConfig, lim storeLimits, instance string, log *slog.Logger, cl *closers) (tasks.Store, error) {
	switch c.Kind {
	case storePostgres:
		dsn, setting, err := c.dsn()
		if err != nil {
			return nil, err
		}
		m := lim.memory // the budgets: bytes and per-caller quotas (zero: none)
		s, err := postgres.Open(ctx, dsn, postgres.Options{Capacity: lim.capacity, Retention: lim.retention, Bytes: m.Bytes, QuotaTasks: m.QuotaTasks, QuotaBytes: m.QuotaBytes,
			LeaseTTL: c.Lease, Instance: instance, Log: log})
		if err != nil {
			return nil, cli.UsageError("--store postgres (%s): %v", setting, err)
		}
		log.Info("task store open", "store", storePostgres, "where", s.Where(), "instance", s.Instance(), "lease", c.Lease.String())
		cl.add(func() { s.Close() })
		return s, nil
	case storeMemory:
		if lim.memory.Capacity > 0 {
			return tasks.NewMemoryStoreLimits(lim.memory), nil
		}
		return tasks.NewMemoryStore(lim.capacity, lim.retention), nil
	case storeSQLite:
		dir, err := c.stateDir()
		if err != nil {
			return nil, err
		}
		s, err := openSQLite(ctx, dir, lim, log)
		if err != nil {
			return nil, err
		}
		cl.add(func() { s.Close() })
		if instance != "" {
			// A service: the store command may share a running one's
			// store by design, and says nothing.
			warnShared(s, log)
		}
		return s, nil
	}
	return nil, cli.UsageError("--store %q: want sqlite, memory or postgres", c.Kind)
}

// dsn reads the PostgreSQL DSN (the build's step) and names where it came
// from.
func (c *storeConfig) dsn() (dsn, setting string, err error) {
	if c.DSN != "" {
		return c.DSN, envStoreDSN, nil
	}
	b, err := secretfile.Read(c.DSNFile)
	if err != nil {
		return "", "", cli.UsageError("--store-dsn-file: %v", err)
	}
	dsn = strings.TrimSpace(string(b))
	if dsn == "" {
		return "", "", cli.UsageError("--store-dsn-file %s is empty", c.DSNFile)
	}
	return dsn, "--store-dsn-file " + c.DSNFile, nil
}

// warnShared logs, at warn, the other agentd processes live on s's state
// directory: they share its tasks, not their runs.
func warnShared(s *sqlite.Store, log *slog.Logger) {
	others, err := s.Others()
	if err != nil {
		log.Warn("task store: cannot tell whether another agentd uses this state directory", "path", s.Path(), "err", err)
		return
	}
	if len(others) == 0 {
		return
	}
	var who []string
	for _, o := range others {
		who = append(who, fmt.Sprintf("instance %s (pid %d)", o.Instance, o.PID))
	}
	log.Warn("task store: another agentd process uses this state directory: the two share its tasks but not their runs, and each cancels only the tasks it accepted (run one agentd per --state-dir, or replicas with --store postgres)",
		"path", s.Path(), "others", strings.Join(who, ", "))
}

// openSQLite opens the embedded store in dir.
func openSQLite(ctx context.Context, dir string, lim storeLimits, log *slog.Logger) (*sqlite.Store, error) {
	m := lim.memory // the budgets: bytes and per-caller quotas (zero: none)
	s, err := sqlite.Open(ctx, dir, sqlite.Options{Capacity: lim.capacity, Retention: lim.retention, Bytes: m.Bytes, QuotaTasks: m.QuotaTasks, QuotaBytes: m.QuotaBytes, Log: log})
	var se *store.SchemaError
	switch {
	case errors.As(err, &se):
		return nil, cli.UsageError("--state-dir %s: %v", dir, err)
	case err != nil:
		return nil, cli.UsageError("--state-dir %s: the task store cannot be opened: %v", dir, err)
	}
	log.Info("task store open", "store", storeSQLite, "path", s.Path(), "instance", s.Instance())
	return s, nil
}
