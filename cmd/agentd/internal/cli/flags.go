package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// Flags is a flag.FlagSet whose flags fill the fields of a config struct and
// may default from an environment variable. A bad environment value is a
// usage error naming the variable, reported by Parse.
type Flags struct {
	*flag.FlagSet
	// name is the command, as in its usage line ("serve", "ctl a2a.Tree").
	name string
	// stderr receives the usage (-h) and a parse error.
	stderr io.Writer
	// errs are the bad values of environment variables that hold entries
	// the command line adds to (--peer, --route): they count whatever the
	// flags say.
	errs []error
	// envErrs are the bad values of environment variables a flag replaces,
	// by flag name: they count only when the flag is not given.
	envErrs map[string]error
	// envs is each flag's environment variable, by flag name.
	envs map[string]string
	// Operands names the command's arguments after the flags in its usage
	// line (such as "TEXT"); empty when it takes none.
	Operands string
	// printUsage prints the usage and every flag (-h).
	printUsage func()
}

// FlagsMade, when set (by tests), sees every command's flags as they are
// made.
var FlagsMade func(*Flags)

// NewFlags is the flags of the command name ("serve", "ctl a2a.Tree"): its -h
// prints the usage line, summary and every flag on stderr.
func NewFlags(name string, stderr io.Writer, summary string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package prints a parse error followed by the whole usage;
	// Parse prints a short error instead, and the usage only for -h.
	fs.SetOutput(io.Discard)
	f := &Flags{FlagSet: fs, name: name, stderr: stderr, envErrs: map[string]error{}, envs: map[string]string{}}
	fs.Usage = func() {}
	f.printUsage = func() {
		args := ""
		if f.Operands != "" {
			args = " " + f.Operands
		}
		fmt.Fprintf(stderr, "Usage: agentd %s [flags]%s\n\n%s\n\nFlags (a flag beats its environment variable, which beats the default):\n", name, args, summary)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if FlagsMade != nil {
		FlagsMade(f)
	}
	return f
}

// Envs is each flag's environment variable, by flag name.
func (f *Flags) Envs() map[string]string { return f.envs }

func envNote(env string) string {
	if env == "" {
		return ""
	}
	return " (env " + env + ")"
}

// envVar defines the flag name on p with define; the environment variable env,
// when set, replaces the default def (parsed with parse).
// A bad value of env is an error only when the flag is not given (Parse).
func envVar[T any](f *Flags, define func(p *T, name string, value T, usage string), parse func(string) (T, error), p *T, name, env string, def T, usage string) {
	f.noteEnv(name, env)
	if v, ok := os.LookupEnv(env); ok && env != "" {
		x, err := parse(v)
		if err != nil {
			f.envErrs[name] = fmt.Errorf("invalid %s=%q: %v", env, v, err)
		} else {
			def = x
		}
	}
	define(p, name, def, usage+envNote(env))
}

// EnvString defines a string flag that defaults from env (none when "").
func (f *Flags) EnvString(p *string, name, env, def, usage string) {
	envVar(f, f.StringVar, func(s string) (string, error) { return s, nil }, p, name, env, def, usage)
}

// EnvInt defines an int flag that defaults from env (none when "").
func (f *Flags) EnvInt(p *int, name, env string, def int, usage string) {
	envVar(f, f.IntVar, strconv.Atoi, p, name, env, def, usage)
}

// EnvInt64 defines an int64 flag that defaults from env (none when "").
func (f *Flags) EnvInt64(p *int64, name, env string, def int64, usage string) {
	envVar(f, f.Int64Var, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, p, name, env, def, usage)
}

// EnvFloat64 defines a float64 flag that defaults from env (none when "").
func (f *Flags) EnvFloat64(p *float64, name, env string, def float64, usage string) {
	envVar(f, f.Float64Var, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, p, name, env, def, usage)
}

// EnvDuration defines a duration flag that defaults from env (none when "").
func (f *Flags) EnvDuration(p *time.Duration, name, env string, def time.Duration, usage string) {
	envVar(f, f.DurationVar, time.ParseDuration, p, name, env, def, usage)
}

// EnvBool defines a bool flag that defaults from env (none when "").
func (f *Flags) EnvBool(p *bool, name, env string, def bool, usage string) {
	envVar(f, f.BoolVar, strconv.ParseBool, p, name, env, def, usage)
}

// noteEnv records that flag name defaults from env.
func (f *Flags) noteEnv(name, env string) {
	if env != "" {
		f.envs[name] = env
	}
}

// Parse parses args; -h prints usage and is not an error. A bad flag is a
// usage error of a few lines (the error, a flag it may have meant, where the
// flags are listed), not the whole usage. A bad environment variable is a
// usage error unless its flag is given: a flag beats its environment
// variable.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.printUsage()
			return ExitWith(api.ExitOK)
		}
		return BadConfig(errors.New(f.explain(err)))
	}
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	errs := f.errs
	var names []string
	for name := range f.envErrs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !given[name] {
			errs = append(errs, f.envErrs[name])
		}
	}
	if len(errs) > 0 {
		return BadConfig(errors.Join(errs...))
	}
	return nil
}

// secretFlags are flags people try that would put a secret on argv, with
// where the secret goes instead.
var secretFlags = map[string]string{
	"intelligence-key": "set AGENT_INTELLIGENCE_KEY in the environment, or give --intelligence-key-file FILE",
	"api-key":          "set AGENT_INTELLIGENCE_KEY in the environment, or give --intelligence-key-file FILE",
	"key":              "set AGENT_INTELLIGENCE_KEY in the environment, or give --intelligence-key-file FILE",
	"mcp-token":        "set AGENT_MCP_TOKEN_<NAME> in the environment, or give --mcp-token-file NAME=FILE",
	"token":            "give --token-file FILE",
}

// explain turns the flag package's parse error into the lines agentd
// prints: the error, a close flag when there is one, and where the flags
// are listed. It never repeats a value given to an unknown flag (it may be a
// secret).
func (f *Flags) explain(err error) string {
	var b strings.Builder
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		fmt.Fprintf(&b, "%s: unknown flag --%s", f.name, name)
		if hint, ok := secretFlags[name]; ok && f.secretHintApplies(hint) {
			fmt.Fprintf(&b, "\na secret never goes on the command line (ps and shell history show it): %s", hint)
		} else if near := f.closest(name); near != "" {
			fmt.Fprintf(&b, "\ndid you mean --%s?", near)
		}
	} else if m := badValue().FindStringSubmatch(msg); m != nil {
		// The flag package says "parse error" for a malformed number or
		// duration: say what the flag wants.
		why := m[3]
		if fl := f.Lookup(m[2]); fl != nil && (why == "parse error" || why == "value out of range") {
			kind, _ := flag.UnquoteUsage(fl)
			why = "want " + kinds[kind]
			if why == "want " {
				why = "want a " + kind
			}
		}
		fmt.Fprintf(&b, "%s: --%s %s: %s", f.name, m[2], m[1], why)
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		fmt.Fprintf(&b, "%s: --%s needs a value", f.name, name)
	} else {
		fmt.Fprintf(&b, "%s: %s", f.name, msg)
	}
	fmt.Fprintf(&b, "\nrun 'agentd %s -h' for the flags", f.name)
	return b.String()
}

// kinds says what a flag of each type takes.
var kinds = map[string]string{
	"":         "true or false",
	"int":      "a whole number",
	"uint":     "a whole number",
	"float":    "a number",
	"duration": "a duration such as 30s or 5m",
}

// badValue matches the flag package's error for a value its flag refuses:
// the value (quoted), the flag and why. It is compiled on the first bad
// flag, not at init: a subagent (the same binary) never parses a flag.
var badValue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]+): (.*)$`)
})

// secretHintApplies reports whether the flags hint names are flags of this
// command (a key file hint is no help to a command without it).
func (f *Flags) secretHintApplies(hint string) bool {
	for _, w := range strings.Fields(hint) {
		if name, ok := strings.CutPrefix(w, "--"); ok && f.Lookup(name) == nil {
			return false
		}
	}
	return true
}

// closest is the one flag name nearest name within a few edits (one for a
// short name, two from eight characters on), or the one flag name has as its
// prefix; "" when there is none or more than one.
func (f *Flags) closest(name string) string {
	best, bestD, ties := "", max(1, min(2, len(name)/4))+1, 0
	var prefixed []string
	f.VisitAll(func(fl *flag.Flag) {
		if strings.HasPrefix(fl.Name, name) {
			prefixed = append(prefixed, fl.Name)
		}
		switch d := editDistance(name, fl.Name); {
		case d < bestD:
			best, bestD, ties = fl.Name, d, 1
		case d == bestD:
			ties++
		}
	})
	switch {
	case best != "" && ties == 1:
		return best
	case len(prefixed) == 1 && len(name) >= 3:
		return prefixed[0]
	}
	return ""
}

// ClosestWord is the word of words nearest w within two edits (each word
// compared as norm makes it, and without its prefix "a2a."), or "" when
// none is that near or two are equally near.
func ClosestWord(w string, words []string, norm func(string) string) string {
	best, bestD, ties := "", 3, 0
	for _, c := range words {
		n := norm(c)
		d := min(editDistance(w, n), editDistance(w, strings.TrimPrefix(n, "a2a.")))
		switch {
		case d < bestD:
			best, bestD, ties = c, d, 1
		case d == bestD:
			ties++
		}
	}
	if ties != 1 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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

// CommaList splits a value at commas, dropping empty entries.
func CommaList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// EnvList defines a repeatable flag on p; each value (and the environment
// variable's) may itself be comma-separated.
func (f *Flags) EnvList(p *[]string, name, env, usage string) {
	f.noteEnv(name, env)
	r := &repeated{vals: p, split: CommaList}
	if v, ok := os.LookupEnv(env); ok && env != "" {
		*p, r.fromEnv = CommaList(v), true
	}
	f.Var(r, name, usage+" (repeatable)"+envNote(env))
}

// EnvFuncList defines a repeatable flag that adds each value with add, which
// names the flag in its error. Its environment variable holds the values
// separated by ';'; a bad one is reported by Parse.
func (f *Flags) EnvFuncList(name, env, usage string, add func(string) error) {
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

// EnvEntries defines a repeatable flag on p whose values keep their commas (an
// MCP entry such as NAME=untrusted_input,sensitive). Its environment variable
// holds the same entries separated by whitespace.
func (f *Flags) EnvEntries(p *[]string, name, env, usage string) {
	f.noteEnv(name, env)
	r := &repeated{vals: p}
	if v, ok := os.LookupEnv(env); ok && env != "" {
		*p, r.fromEnv = strings.Fields(v), true
	}
	f.Var(r, name, usage+" (repeatable)"+envNote(env))
}
