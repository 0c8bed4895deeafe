// Package pgtest starts a real PostgreSQL server for a test: initdb into a
// temporary directory, postgres on a free port of 127.0.0.1 with its unix
// socket in that directory, stopped and removed when the test ends. PostgreSQL
// refuses to run as root, so under root (CI) the server runs as the nobody
// user, in a directory given to it. The binaries come from PATH or
// /usr/lib/postgresql/*/bin (the Makefile's test-deps installs Debian's
// postgresql package when they are missing).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/testkit"
)

// nobody is the unprivileged user a root test runs the server as.
const nobody = 65534

// Server is one running PostgreSQL server. Its methods are safe for
// concurrent use.
type Server struct {
	dir  string // the data directory's parent: data/, sock/, log
	bin  string
	port int

	durable bool // fsync and synchronous commits on (a benchmark's server)

	mu   sync.Mutex // guards cmd, done
	cmd  *exec.Cmd
	done chan struct{}
	dbs  int
}

// Options configure a server started by New.
type Options struct {
	// Durable keeps PostgreSQL's defaults, fsync and synchronous commits
	// on, as a production server runs; without it (the tests' server)
	// they are off.
	Durable bool
}

// Bin returns the folder of PostgreSQL's binaries, or an error saying how
// to install them.
func Bin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		p, _ = filepath.EvalSymlinks(p)
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin): run `make test-deps`, which installs Debian's postgresql package")
}

// Start initialises and starts a server for t, stopped and removed at t's
// cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New initialises and starts a server outside a test (a benchmark); Close
// stops and removes it.
func New(o Options) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, durable: o.Durable}
	fail := func(err error) (*Server, error) {
		s.Close()
		return nil, err
	}
	for _, d := range []string{"data", "sock"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return fail(err)
		}
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "sock")} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				return fail(err)
			}
		}
	}
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb: %v\n%s", err, out))
	}
	// A port below the ephemeral range (testkit.FreePort), so that no other
	// test's listener takes it before postgres binds it, or while it
	// restarts on it; taken by another test process all the same, postgres
	// is started again on another.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			return fail(err)
		}
		err = s.start()
		if err == nil {
			return s, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return fail(err)
		}
		s.Stop() // the postmaster has exited: forget it, so that start runs again
	}
}

// freePort is where New finds its port (a test's stand-in can hand it a
// taken one).
var freePort = testkit.FreePort

// Close stops the server (a fast shutdown, in which the postmaster reaps its
// backends, so none is left to whoever reaps orphans) and removes its
// directory.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.dir)
}

// command is a PostgreSQL command, run as nobody when the test runs as root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	return cmd
}

// Restart starts the server again, after Stop or Kill, on the same data and
// port, and waits until it accepts connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// start starts postgres and waits until it accepts connections.
func (s *Server) start() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("pgtest: the server is running")
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	args := []string{"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port), "-h", "127.0.0.1", "-k", filepath.Join(s.dir, "sock"), "-c", "max_connections=200"}
	if !s.durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		log.Close()
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Each try bounded: whatever holds the port may accept and never
		// answer (a listener that took it before postgres could bind it).
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.dsn("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("pgtest: postgres exited: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not accepting connections within 30s: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down (fast shutdown: connections are closed) and
// waits for it to exit.
func (s *Server) Stop() { s.signal(syscall.SIGINT) }

// Kill ends the server at once (SIGKILL to its process group).
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if sig == syscall.SIGKILL {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	} else {
		cmd.Process.Signal(sig)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-done
	if sig == syscall.SIGKILL {
		// A killed postmaster leaves its shared memory and pid file; the
		// next start recovers from them.
		os.Remove(filepath.Join(s.dir, "data", "postmaster.pid"))
	}
}

// Freeze stops every process of the server (SIGSTOP to its process group):
// its connections stay open and nothing answers, as across a partition.
// Thaw undoes it.
func (s *Server) Freeze() { s.groupSignal(syscall.SIGSTOP) }

// Thaw resumes a server Freeze stopped (SIGCONT to its process group).
func (s *Server) Thaw() { s.groupSignal(syscall.SIGCONT) }

// groupSignal signals the postmaster and each of its children: a backend
// calls setsid, so the postmaster's process group does not hold them.
func (s *Server) groupSignal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pm := s.cmd.Process.Pid
	syscall.Kill(pm, sig)
	for _, pid := range testkit.Children(pm) {
		syscall.Kill(pid, sig)
	}
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

func (s *Server) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Database creates a new, empty database and returns its DSN.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	dsn, err := s.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// NewDatabase creates a new, empty database and returns its DSN.
func (s *Server) NewDatabase() (string, error) {
	s.mu.Lock()
	s.dbs++
	name := fmt.Sprintf("test_%d", s.dbs)
	s.mu.Unlock()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.dsn(name), nil
}
