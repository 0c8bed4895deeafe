package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// A program is a built serve or run, ready to start: everything it needs is
// open. Run runs it until it ends or ctx is cancelled (the first signal), then
// drains and closes what the build opened, in reverse order. Force is the
// second signal: SIGKILL to every process group, so that the drain under way
// ends as soon as the groups are reaped. Force may be called from another
// goroutine at any time, and more than once.
type program interface {
	Run(ctx context.Context) error
	Force()
}

// signalled is the cause of a context cancelled by a signal.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return "signal " + s.sig.String() }

// Log messages of the signal policy (the e2e tests match the second and the
// SIGHUP ones).
const (
	msgDraining    = "signal: draining (a second signal forces)"
	msgSecondForce = "second signal: SIGKILL to every process group"
	msgNotStarted  = "signal before start: nothing to drain"
	msgHupReload   = "SIGHUP: reloading"
	msgHupEarly    = "SIGHUP before the service started: nothing to reload yet"
)

// hupPolicy is what SIGHUP does to a command under the signal policy. It
// never kills agentd by its default action.
type hupPolicy int

const (
	// hupReload (serve): the program reloads what it can (reloader) and
	// keeps running; SIGHUP is not one of the two signals.
	hupReload hupPolicy = iota
	// hupDrain (run): the terminal of a one-shot run hung up; SIGHUP is a
	// signal like SIGTERM (the first drains, the second forces).
	hupDrain
)

// reloader is a program that reloads its files on SIGHUP (serve: the bearer
// tokens file). Reload logs what it did; it never stops the program.
type reloader interface {
	Reload()
}

// runWithSignals runs the program build makes under the two-signal policy of
// serve and run, SIGHUP handled as hup says; see runUnderSignals.
func runWithSignals(ctx context.Context, log *slog.Logger, hup hupPolicy, build func(context.Context) (program, error)) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	return runUnderSignals(ctx, log, sigs, hup, build)
}

// runUnderSignals is the one owner of the two-signal policy. Signals are
// caught from before the build: a SIGTERM never ends agentd by its default
// action, not even before the supervisor exists.
//
//   - The first SIGTERM or SIGINT cancels the context build and Run get, with
//     the signal as its cause (signalled). A build that sees it gives up, and
//     the command exits 0: nothing had started, so nothing is left to drain
//     (bad config still exits 2).
//     A running program drains: it refuses new work and runs the kill ladder
//     over every tree within --drain-timeout. When an a2a.Drain began the
//     drain already, this signal changes nothing.
//   - The second forces: Force of the program (SIGKILL to every process
//     group), at once, or as soon as the build returns one.
//   - Later signals are ignored.
//   - SIGHUP, with hupReload, is none of these: a built program that is a
//     reloader reloads (logged), one still being built logs that there is
//     nothing to reload yet. With hupDrain it counts as SIGTERM.
func runUnderSignals(ctx context.Context, log *slog.Logger, sigs <-chan os.Signal, hup hupPolicy, build func(context.Context) (program, error)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu     sync.Mutex // guards prog, forced
		prog   program
		forced bool
	)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for n := 1; ; {
			var sig os.Signal
			select {
			case sig = <-sigs:
			case <-stop:
				return
			}
			if sig == syscall.SIGHUP && hup == hupReload {
				mu.Lock()
				p := prog
				mu.Unlock()
				if r, ok := p.(reloader); ok {
					log.Info(msgHupReload, "signal", sig.String())
					r.Reload()
				} else {
					log.Info(msgHupEarly, "signal", sig.String())
				}
				continue
			}
			switch n {
			case 1:
				log.Info(msgDraining, "signal", sig.String())
				cancel(signalled{sig})
			case 2:
				log.Warn(msgSecondForce, "signal", sig.String())
				mu.Lock()
				forced = true
				p := prog
				mu.Unlock()
				if p != nil {
					p.Force()
				}
			}
			n++
		}
	}()
	p, err := build(ctx)
	if err != nil {
		var s signalled
		var ee *cli.ExitError
		badConfig := errors.As(err, &ee) && ee.Code == api.ExitUsage
		if errors.As(context.Cause(ctx), &s) && !badConfig {
			log.Info(msgNotStarted, "signal", s.sig.String(), "err", err)
			return nil
		}
		return err
	}
	mu.Lock()
	prog = p
	f := forced
	mu.Unlock()
	if f {
		p.Force()
	}
	return p.Run(ctx)
}

// closers is what a build opened, closed in reverse order. Not safe for
// concurrent use; the zero value holds nothing.
type closers []func()

// add makes f the first to run on close.
func (c *closers) add(f func()) { *c = append(*c, f) }

// close runs every closer, the last added first, and forgets them.
func (c *closers) close() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}
