package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/api"
)

// exitError carries a specific exit code out of run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError is bad usage or bad config: exit 2, with a message naming the
// setting.
func usageError(format string, args ...any) error {
	return badConfig(fmt.Errorf(format, args...))
}

// config is a command's settings; Validate reports the first bad one, naming
// it, and does no I/O.
type config interface{ Validate() error }

// validated passes on a parse error, and checks what parsed: a Validate error
// is bad config (exit 2).
func validated[C config](c C, err error) (C, error) {
	if err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, badConfig(err)
	}
	return c, nil
}

// badConfig is a Validate error: exit 2; the message names the setting.
func badConfig(err error) error { return &exitError{code: api.ExitUsage, err: err} }

// exitWith ends the process with code, printing nothing more.
func exitWith(code int) error { return &exitError{code: code} }

// exitCode is the process's exit code for err (from run), which it prints.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "agentd:", ee.err)
		}
		return ee.code
	}
	if errors.Is(err, sqlite.ErrStateDir) {
		// The state directory cannot be used (a database whose pages are
		// damaged, met after it opened): bad config, as at its opening.
		fmt.Fprintln(stderr, "agentd: --state-dir:", err)
		return api.ExitUsage
	}
	fmt.Fprintln(stderr, "agentd:", err)
	return api.ExitFailure
}
