package main

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/testkit"
)

// fakeProgram records what the signal policy does to it: Run returns once it
// saw its context cancelled and, when wantForce, once it was forced.
type fakeProgram struct {
	wantForce bool
	forced    chan struct{}
	cause     chan error // the cause of Run's cancelled context
}

func newFakeProgram(wantForce bool) *fakeProgram {
	return &fakeProgram{wantForce: wantForce, forced: make(chan struct{}), cause: make(chan error, 1)}
}

func (p *fakeProgram) Force() {
	select {
	case <-p.forced:
	default:
		close(p.forced)
	}
}

func (p *fakeProgram) Run(ctx context.Context) error {
	<-ctx.Done()
	p.cause <- context.Cause(ctx)
	if p.wantForce {
		<-p.forced
	}
	return nil
}

// within fails the test unless ch delivers within a second.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Second):
		t.Fatalf("%s: not within 1s", what)
	}
	var zero T
	return zero
}

// The first signal cancels Run's context with the signal as its cause (the
// program drains); the second forces.
func TestFirstSignalDrainsSecondForces(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	p := newFakeProgram(true)
	done := make(chan error, 1)
	go func() {
		done <- runUnderSignals(context.Background(), discardLog(), sigs, hupDrain, func(context.Context) (program, error) { return p, nil })
	}()
	sigs <- syscall.SIGTERM
	var s signalled
	if cause := within(t, p.cause, "the drain"); !errors.As(cause, &s) || s.sig != syscall.SIGTERM {
		t.Fatalf("Run's context ended by %v, want the signal", cause)
	}
	select {
	case <-p.forced:
		t.Fatal("the first signal forced")
	default:
	}
	sigs <- syscall.SIGINT
	within(t, p.forced, "the force")
	if err := within(t, done, "the exit"); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// A signal before the program exists ends the build, and the command exits 0:
// nothing had started. Bad config still exits 2.
func TestSignalDuringTheBuild(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"the build gives up", &cli.ExitError{Code: api.ExitMCPUnavailable, Err: errors.New("mcp down")}, 0},
		{"bad config", cli.UsageError("--mcp-tools: x/y is not a tool its server lists"), api.ExitUsage},
	} {
		sigs := make(chan os.Signal, 2)
		err := runUnderSignals(context.Background(), discardLog(), sigs, hupDrain, func(ctx context.Context) (program, error) {
			sigs <- syscall.SIGTERM
			<-ctx.Done()
			return nil, tc.err
		})
		if got := exitCode(err, io.Discard); got != tc.want {
			t.Errorf("%s: exit %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
}

// A second signal while the build is still under way forces the program as
// soon as the build returns it.
func TestSecondSignalBeforeTheProgramExists(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	p := newFakeProgram(true)
	err := runUnderSignals(context.Background(), discardLog(), sigs, hupDrain, func(ctx context.Context) (program, error) {
		sigs <- syscall.SIGTERM
		<-ctx.Done()
		sigs <- syscall.SIGTERM
		// Wait (up to a second) until the policy took the second signal, so
		// that it most likely comes before the program exists; in either
		// order the program must be forced.
		testkit.Poll(time.Second, func() bool { return len(sigs) == 0 })
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	within(t, p.forced, "the force")
}

// Without a signal, Run's result is the command's.
func TestNoSignal(t *testing.T) {
	want := cli.ExitWith(api.ExitPartial)
	err := runUnderSignals(context.Background(), discardLog(), make(chan os.Signal), hupDrain, func(context.Context) (program, error) {
		return programFunc(func(context.Context) error { return want }), nil
	})
	if err != want {
		t.Fatalf("exit: %v", err)
	}
}

// programFunc is a program that is never forced.
type programFunc func(context.Context) error

func (f programFunc) Run(ctx context.Context) error { return f(ctx) }
func (programFunc) Force()                          {}

// What a build opened closes in reverse order, once.
func TestClosersCloseInReverse(t *testing.T) {
	var got []int
	var c closers
	for i := range 3 {
		c.add(func() { got = append(got, i) })
	}
	c.close()
	c.close()
	if len(got) != 3 || got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("closed %v, want [2 1 0]", got)
	}
}

// reloadingProgram is a fakeProgram that counts its reloads.
type reloadingProgram struct {
	*fakeProgram
	reloads chan struct{}
}

func (p *reloadingProgram) Reload() { p.reloads <- struct{}{} }

// SIGHUP under serve's policy reloads and never drains or forces: after two
// SIGHUPs the first SIGTERM still drains and the program still runs.
func TestHupReloads(t *testing.T) {
	sigs := make(chan os.Signal, 4)
	p := &reloadingProgram{fakeProgram: newFakeProgram(false), reloads: make(chan struct{}, 2)}
	built := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runUnderSignals(context.Background(), discardLog(), sigs, hupReload, func(context.Context) (program, error) {
			close(built)
			return p, nil
		})
	}()
	<-built
	// The program may not be registered yet when the first SIGHUP arrives:
	// poll until a reload is seen.
	deadline := time.Now().Add(5 * time.Second)
	for reloaded := false; !reloaded; {
		sigs <- syscall.SIGHUP
		select {
		case <-p.reloads:
			reloaded = true
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("SIGHUP did not reload")
			}
		}
	}
	sigs <- syscall.SIGHUP
	within(t, p.reloads, "the second reload")
	select {
	case c := <-p.cause:
		t.Fatalf("SIGHUP ended Run: %v", c)
	default:
	}
	sigs <- syscall.SIGTERM
	var s signalled
	if cause := within(t, p.cause, "the drain"); !errors.As(cause, &s) || s.sig != syscall.SIGTERM {
		t.Fatalf("Run's context ended by %v, want SIGTERM", cause)
	}
	if err := within(t, done, "the exit"); err != nil {
		t.Fatal(err)
	}
}

// Under run's policy SIGHUP (the terminal hung up) is SIGTERM: the first
// drains.
func TestHupDrainsARun(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	p := newFakeProgram(false)
	done := make(chan error, 1)
	go func() {
		done <- runUnderSignals(context.Background(), discardLog(), sigs, hupDrain, func(context.Context) (program, error) { return p, nil })
	}()
	sigs <- syscall.SIGHUP
	var s signalled
	if cause := within(t, p.cause, "the drain"); !errors.As(cause, &s) || s.sig != syscall.SIGHUP {
		t.Fatalf("Run's context ended by %v, want SIGHUP", cause)
	}
	within(t, done, "the exit")
}
