package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

// helpFlag is one flag as `agentd COMMAND -h` prints it.
type helpFlag struct {
	name, usage, env string
}

// helpFlags runs `agentd args... -h` and returns the flags it prints.
func helpFlags(t *testing.T, args ...string) []helpFlag {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append(args, "-h"), &out, &out)
	if code := exitCode(err, &out); code != 0 {
		t.Fatalf("%v -h: exit %d\n%s", args, code, out.String())
	}
	envRE := regexp.MustCompile(`\(env ([A-Z_]+)\)`)
	var flags []helpFlag
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "  -") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			flags = append(flags, helpFlag{name: name})
			continue
		}
		if len(flags) > 0 && strings.HasPrefix(line, "    \t") {
			f := &flags[len(flags)-1]
			f.usage += strings.TrimPrefix(line, "    \t") + " "
			if m := envRE.FindStringSubmatch(line); m != nil {
				f.env = m[1]
			}
		}
	}
	if len(flags) == 0 {
		t.Fatalf("%v -h printed no flags:\n%s", args, out.String())
	}
	return flags
}

// docs/flags.md and -h agree (issue 29.15: --intelligence's -h left out
// builtin:script): every flag of every command's -h is in the doc, on a table
// row that names its environment variable when it has one (or, for ctl's
// method flags, in the prose on them); and where the doc names the forms a
// value takes (the builtin intelligences), -h names each too.
func TestFlagsDocMatchesHelp(t *testing.T) {
	b, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var rows []string
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "| `--") {
			rows = append(rows, l)
		}
	}
	commands := [][]string{{"serve"}, {"run"}, {"send"}, {"store", "inspect"}, {"store", "prune"}, {"certs", "init"}}
	for _, m := range api.OperatorMethods {
		commands = append(commands, []string{"ctl", m})
	}
	builtinRE := regexp.MustCompile("`(builtin:[a-z]+)")
	for _, cmd := range commands {
		for _, f := range helpFlags(t, cmd...) {
			mention := regexp.MustCompile("--" + regexp.QuoteMeta(f.name) + `\b[^-]`)
			if !mention.MatchString(doc) {
				t.Errorf("%v: --%s is not in docs/flags.md", cmd, f.name)
				continue
			}
			var own []string // the table rows that document the flag
			for _, r := range rows {
				first, _, _ := strings.Cut(strings.TrimPrefix(r, "| "), " | ")
				if mention.MatchString(first + " ") {
					own = append(own, r)
				}
			}
			if f.env != "" {
				found := false
				for _, r := range own {
					found = found || strings.Contains(r, "`"+f.env+"`")
				}
				if !found {
					t.Errorf("%v: no row of docs/flags.md documents --%s with its variable %s", cmd, f.name, f.env)
				}
			}
			for _, r := range own {
				for _, m := range builtinRE.FindAllStringSubmatch(r, -1) {
					if !strings.Contains(f.usage, m[1]) {
						t.Errorf("%v: docs/flags.md lists %s for --%s, its -h does not: %s", cmd, m[1], f.name, f.usage)
					}
				}
			}
		}
	}
}
