// Package clitest holds the test helpers agentd's command packages share: a
// pseudo-terminal, the check of a config's Validate, and the check that every
// flag beats its environment variable.
package clitest

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// OpenPTY opens a pseudo-terminal pair: what is written to tty reads back
// from pty. Both are closed when the test ends.
func OpenPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	// Non-blocking, so the runtime's poller serves it and read deadlines
	// work.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	m := os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlock the pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open the tty: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// ValidateCase is one bad setting: Set breaks a valid configuration, and the
// error must name Want. It is an unnamed struct type, so a test writes its
// cases unkeyed.
type ValidateCase[C any] = struct {
	Want string
	Set  func(c *C)
}

// CheckValidate checks that a configuration from parse validates, and that
// each case, applied to another, fails naming its setting.
func CheckValidate[C any](t *testing.T, parse func() (*C, error), validate func(*C) error, cases []ValidateCase[C]) {
	t.Helper()
	fresh := func() *C {
		t.Helper()
		c, err := parse()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := validate(fresh()); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	for _, tc := range cases {
		c := fresh()
		tc.Set(c)
		err := validate(c)
		if err == nil {
			t.Errorf("%s: Validate passed", tc.Want)
			continue
		}
		if !strings.Contains(err.Error(), tc.Want) {
			t.Errorf("error %q does not name %s", err, tc.Want)
		}
		var ee *cli.ExitError
		if errors.As(err, &ee) {
			t.Errorf("%s: Validate returned an exit code (%d): the command maps its errors to exit 2", tc.Want, ee.Code)
		}
	}
}

// FlagsBeatTheirEnvironment checks, for every flag of each command of parsers
// (its parse-and-validate step, by name) that has an environment variable,
// that the flag beats the variable: a malformed value of the variable changes
// nothing when the flag is given (the same config, or the same error, as
// without the variable). It returns how many flags it checked.
func FlagsBeatTheirEnvironment(t *testing.T, parsers map[string]func(args []string) (any, error)) int {
	t.Helper()
	n := 0
	for name, parse := range parsers {
		// The flags and their defaults, with no variable set.
		var made []*cli.Flags
		cli.FlagsMade = func(f *cli.Flags) { made = append(made, f) }
		_, _ = parse(nil)
		cli.FlagsMade = nil
		if len(made) != 1 {
			t.Fatalf("%s: %d flag sets", name, len(made))
		}
		f := made[0]
		for flagName, env := range f.Envs() {
			args := []string{"--" + flagName + "=" + f.Lookup(flagName).DefValue}
			want, wantErr := parse(args)
			t.Run(name+"/"+env, func(t *testing.T) {
				t.Setenv(env, "malformed-value")
				got, err := parse(args)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Errorf("%s=malformed-value %s: %v, want %v", env, args[0], err, wantErr)
				} else if !reflect.DeepEqual(got, want) {
					t.Errorf("%s=malformed-value %s: the config differs:\n%+v\nwant\n%+v", env, args[0], got, want)
				}
			})
			n++
		}
	}
	return n
}
