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

// flags is a flag.FlagSet whose flags fill the fields of a config struct and
// may default from an environment variable. A bad environment value is a
// usage error naming the variable, reported by parse.
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

// envVar defines the flag name on p with define; the environment variable env,
// when set, replaces the default def (parsed with parse).
func envVar[T any](f *flags, define func(p *T, name string, value T, usage string), parse func(string) (T, error), p *T, name, env string, def T, usage string) {
	if v, ok := os.LookupEnv(env); ok && env != "" {
		x, err := parse(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("invalid %s=%q: %v", env, v, err))
		} else {
			def = x
		}
	}
	define(p, name, def, usage+envNote(env))
}

func (f *flags) stringVar(p *string, name, env, def, usage string) {
	envVar(f, f.StringVar, func(s string) (string, error) { return s, nil }, p, name, env, def, usage)
}

func (f *flags) intVar(p *int, name, env string, def int, usage string) {
	envVar(f, f.IntVar, strconv.Atoi, p, name, env, def, usage)
}

func (f *flags) int64Var(p *int64, name, env string, def int64, usage string) {
	envVar(f, f.Int64Var, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, p, name, env, def, usage)
}

func (f *flags) float64Var(p *float64, name, env string, def float64, usage string) {
	envVar(f, f.Float64Var, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, p, name, env, def, usage)
}

func (f *flags) durationVar(p *time.Duration, name, env string, def time.Duration, usage string) {
	envVar(f, f.DurationVar, time.ParseDuration, p, name, env, def, usage)
}

func (f *flags) boolVar(p *bool, name, env string, def bool, usage string) {
	envVar(f, f.BoolVar, strconv.ParseBool, p, name, env, def, usage)
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

// repeated is the value of a repeatable flag: the command line's values
// replace the environment's (a flag beats its environment variable). split
// turns one flag value into entries; it is nil for values kept whole.
type repeated struct {
	vals    *[]string
	fromEnv bool
	split   func(string) []string
}

func (r *repeated) String() string {
	if r == nil || r.vals == nil {
		return ""
	}
	if r.split == nil {
		return strings.Join(*r.vals, " ")
	}
	return strings.Join(*r.vals, ",")
}

func (r *repeated) Set(v string) error {
	if r.fromEnv {
		*r.vals, r.fromEnv = nil, false
	}
	if r.split == nil {
		*r.vals = append(*r.vals, v)
		return nil
	}
	*r.vals = append(*r.vals, r.split(v)...)
	return nil
}

// commaList splits a value at commas, dropping empty entries.
func commaList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// listVar defines a repeatable flag on p; each value (and the environment
// variable's) may itself be comma-separated.
func (f *flags) listVar(p *[]string, name, env, usage string) {
	r := &repeated{vals: p, split: commaList}
	if v, ok := os.LookupEnv(env); ok && env != "" {
		*p, r.fromEnv = commaList(v), true
	}
	f.Var(r, name, usage+" (repeatable)"+envNote(env))
}

// funcList defines a repeatable flag that adds each value with add, which
// names the flag in its error. Its environment variable holds the values
// separated by ';'; a bad one is reported by parse.
func (f *flags) funcList(name, env, usage string, add func(string) error) {
	f.Func(name, usage+envNote(env), func(s string) error {
		if err := add(s); err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		return nil
	})
	if v, ok := os.LookupEnv(env); ok && env != "" {
		for _, item := range strings.Split(v, ";") {
			if strings.TrimSpace(item) == "" {
				continue
			}
			if err := add(item); err != nil {
				f.errs = append(f.errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	}
}

// entriesVar defines a repeatable flag on p whose values keep their commas (an
// MCP entry such as NAME=untrusted_input,sensitive). Its environment variable
// holds the same entries separated by whitespace.
func (f *flags) entriesVar(p *[]string, name, env, usage string) {
	r := &repeated{vals: p}
	if v, ok := os.LookupEnv(env); ok && env != "" {
		*p, r.fromEnv = strings.Fields(v), true
	}
	f.Var(r, name, usage+" (repeatable)"+envNote(env))
}
