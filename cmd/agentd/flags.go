package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// flags is a flag.FlagSet whose flags may default from an environment variable.
// A bad environment value is a usage error naming the variable.
type flags struct {
	*flag.FlagSet
	errs []error
	// args names the command's arguments after the flags in its usage line
	// (such as "TEXT"); empty when it takes none.
	args string
}

func newFlags(name string, stderr io.Writer, summary string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{FlagSet: fs}
	fs.Usage = func() {
		args := ""
		if f.args != "" {
			args = " " + f.args
		}
		fmt.Fprintf(fs.Output(), "Usage: agentd %s [flags]%s\n\n%s\n\nFlags (a flag beats its environment variable, which beats the default):\n", name, args, summary)
		fs.PrintDefaults()
	}
	return f
}

func envNote(env string) string {
	if env == "" {
		return ""
	}
	return " (env " + env + ")"
}

func (f *flags) envErr(env string, v string, err error) {
	f.errs = append(f.errs, fmt.Errorf("invalid %s=%q: %v", env, v, err))
}

func (f *flags) string(name, env, def, usage string) *string {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		def = v
	}
	return f.String(name, def, usage+envNote(env))
}

func (f *flags) int(name, env string, def int, usage string) *int {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.envErr(env, v, err)
		} else {
			def = n
		}
	}
	return f.Int(name, def, usage+envNote(env))
}

func (f *flags) int64(name, env string, def int64, usage string) *int64 {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			f.envErr(env, v, err)
		} else {
			def = n
		}
	}
	return f.Int64(name, def, usage+envNote(env))
}

func (f *flags) float64(name, env string, def float64, usage string) *float64 {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.envErr(env, v, err)
		} else {
			def = x
		}
	}
	return f.Float64(name, def, usage+envNote(env))
}

func (f *flags) duration(name, env string, def time.Duration, usage string) *time.Duration {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErr(env, v, err)
		} else {
			def = d
		}
	}
	return f.Duration(name, def, usage+envNote(env))
}

func (f *flags) bool(name, env string, def bool, usage string) *bool {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.envErr(env, v, err)
		} else {
			def = b
		}
	}
	return f.Bool(name, def, usage+envNote(env))
}

// parse parses args; -h prints usage and is not an error.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitWith(0)
		}
		return exitWith(2) // the flag package already printed the error and usage
	}
	if len(f.errs) > 0 {
		return &exitError{code: 2, err: errors.Join(f.errs...)}
	}
	return nil
}

// listValue is a repeatable flag; each value may itself be comma-separated.
// Values from the environment are replaced by the first value on the command
// line.
type listValue struct {
	vals    []string
	fromEnv bool
}

func (l *listValue) String() string { return strings.Join(l.vals, ",") }

func (l *listValue) Set(v string) error {
	if l.fromEnv {
		l.vals, l.fromEnv = nil, false
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l.vals = append(l.vals, s)
		}
	}
	return nil
}

// list defines a repeatable flag whose default comes from env, comma-separated.
func (f *flags) list(name, env, usage string) *listValue {
	l := &listValue{}
	if v, ok := os.LookupEnv(env); ok && env != "" {
		_ = l.Set(v)
		l.fromEnv = true
	}
	f.Var(l, name, usage+" (repeatable)"+envNote(env))
	return l
}
