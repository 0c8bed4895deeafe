package cli

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
)

// ExitError carries a specific exit code out of a command.
type ExitError struct {
	Code int
	// Err is printed, prefixed "agentd: "; nil prints nothing.
	Err error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is bad usage or bad config: exit 2, with a message naming the
// setting.
func UsageError(format string, args ...any) error {
	return BadConfig(fmt.Errorf(format, args...))
}

// Config is a command's settings; Validate reports the first bad one, naming
// it, and does no I/O.
type Config interface{ Validate() error }

// Validated passes on a parse error, and checks what parsed: a Validate error
// is bad config (exit 2).
func Validated[C Config](c C, err error) (C, error) {
	if err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, BadConfig(err)
	}
	return c, nil
}

// BadConfig is a Validate error: exit 2; the message names the setting.
func BadConfig(err error) error { return &ExitError{Code: api.ExitUsage, Err: err} }

// ExitWith ends the process with code, printing nothing more.
func ExitWith(code int) error { return &ExitError{Code: code} }

// IsHelp reports whether arg asks for help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
