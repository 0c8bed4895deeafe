package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// No container engine runs here, so the image is never built by these tests.
// They parse the Dockerfile with BuildKit's own parser and instruction
// decoder (the code `docker build` runs first), fail on any BuildKit lint
// warning, check the recipe's properties and its agreement with the
// manifests, and run the recipe's `go build` line on the host to check that
// it yields a static binary that works as the non-root user.

// dockerfile is the parsed recipe.
type dockerfile struct {
	stages   []instructions.Stage
	metaArgs map[string]string
}

// parseDockerfile parses src as BuildKit does; a parser or lint warning is
// an error.
func parseDockerfile(src []byte) (*dockerfile, error) {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("parse Dockerfile: %w", err)
	}
	var errs []error
	for _, w := range res.Warnings {
		errs = append(errs, fmt.Errorf("Dockerfile parser warning: %s", w.Short))
	}
	l := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		errs = append(errs, fmt.Errorf("BuildKit lint %s: %s (%v)", rule, msg, loc))
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, l)
	if err != nil {
		return nil, fmt.Errorf("Dockerfile instructions: %w", err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d := &dockerfile{stages: stages, metaArgs: map[string]string{}}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			d.metaArgs[kv.Key] = kv.ValueString()
		}
	}
	return d, nil
}

// expand substitutes the meta ARG defaults into a FROM line.
func (d *dockerfile) expand(s string) (string, error) {
	var env []string
	for k, v := range d.metaArgs {
		env = append(env, k+"="+v)
	}
	r, _, err := shell.NewLex('\\').ProcessWord(s, shell.EnvsFromSlice(env))
	return r, err
}

// stage returns the stage called name.
func (d *dockerfile) stage(name string) *instructions.Stage {
	for i := range d.stages {
		if strings.EqualFold(d.stages[i].Name, name) {
			return &d.stages[i]
		}
	}
	return nil
}

// binaryCopy returns the final stage's COPY --from and the stage it names.
func (d *dockerfile) binaryCopy() (*instructions.CopyCommand, *instructions.Stage, error) {
	final := &d.stages[len(d.stages)-1]
	copies := commands[*instructions.CopyCommand](final)
	ci := slices.IndexFunc(copies, func(c *instructions.CopyCommand) bool { return c.From != "" })
	if ci < 0 {
		return nil, nil, errors.New("the final stage copies nothing from a build stage")
	}
	build := d.stage(copies[ci].From)
	if build == nil || build == final {
		return nil, nil, fmt.Errorf("COPY --from=%s names no earlier stage", copies[ci].From)
	}
	return copies[ci], build, nil
}

// commands returns the commands of type T in st.
func commands[T instructions.Command](st *instructions.Stage) []T {
	var out []T
	for _, c := range st.Commands {
		if v, ok := c.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// goBuild is the recipe's `go build` RUN: its environment (ENV before it
// and VAR=x prefixes) and the go command's arguments, split into words as
// the shell would.
type goBuild struct {
	env    map[string]string
	args   []string // after "go"
	output string   // the -o path
}

func findGoBuild(st *instructions.Stage) (goBuild, error) {
	gb := goBuild{env: map[string]string{}}
	buildArgs := map[string]string{}
	found := false
	for _, c := range st.Commands {
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				gb.env[kv.Key] = kv.Value
			}
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				buildArgs[kv.Key] = kv.ValueString()
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if !strings.Contains(line, "go build") {
				continue
			}
			if found {
				return gb, errors.New("more than one RUN runs go build")
			}
			found = true
			var env []string
			for k, v := range buildArgs {
				env = append(env, k+"="+v)
			}
			words, err := shell.NewLex('\\').ProcessWords(line, shell.EnvsFromSlice(env))
			if err != nil {
				return gb, fmt.Errorf("split %q: %w", line, err)
			}
			i := 0
			for ; i < len(words) && strings.Contains(words[i], "="); i++ {
				k, v, _ := strings.Cut(words[i], "=")
				gb.env[k] = v
			}
			if i+1 >= len(words) || words[i] != "go" || words[i+1] != "build" {
				return gb, fmt.Errorf("the go build RUN is not a plain `[VAR=x ...] go build ...` command: %q", words)
			}
			gb.args = words[i+1:]
			for j, a := range gb.args {
				if a == "-o" && j+1 < len(gb.args) {
					gb.output = gb.args[j+1]
				}
			}
		}
	}
	if !found {
		return gb, errors.New("no RUN in the build stage runs go build")
	}
	if gb.output == "" {
		return gb, errors.New("go build has no -o output path")
	}
	return gb, nil
}

var goDirective = regexp.MustCompile(`(?m)^go (\S+)$`)

// checkDockerfile checks the image recipe src against the rendered base s
// and the main module's Go version: multi-stage; a static build
// (CGO_ENABLED=0) on that Go version with the Makefile's collector
// (GOEXPERIMENT=nogreenteagc); a distroless (or scratch) final stage
// with no RUN, running as uid 65532 with agentd as its exec-form entrypoint;
// and agreement with the Deployment (user, ports, args).
func checkDockerfile(src []byte, s *set, goVersion string) error {
	d, err := parseDockerfile(src)
	if err != nil {
		return err
	}
	if len(d.stages) < 2 {
		return fmt.Errorf("%d stage(s), want a multi-stage build", len(d.stages))
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	final := &d.stages[len(d.stages)-1]
	base, err := d.expand(final.BaseName)
	if err != nil {
		return err
	}
	if base != "scratch" && !strings.HasPrefix(base, "gcr.io/distroless/static") {
		fail("final stage FROM %s, want gcr.io/distroless/static* or scratch", base)
	}
	if runs := commands[*instructions.RunCommand](final); len(runs) > 0 {
		fail("final stage has %d RUN instruction(s); a distroless image has no shell", len(runs))
	}

	cp, build, err := d.binaryCopy()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	buildBase, err := d.expand(build.BaseName)
	if err != nil {
		return err
	}
	if want := "golang:" + goVersion + "-"; !strings.HasPrefix(buildBase, want) {
		fail("build stage FROM %s, want %s* (the main module's go directive)", buildBase, want)
	}
	gb, err := findGoBuild(build)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if gb.env["CGO_ENABLED"] != "0" {
		fail("go build runs with CGO_ENABLED=%q, want 0 (a static binary)", gb.env["CGO_ENABLED"])
	}
	if !slices.Contains(strings.Split(gb.env["GOEXPERIMENT"], ","), "nogreenteagc") {
		fail("go build runs with GOEXPERIMENT=%q, want nogreenteagc (the Makefile's collector)", gb.env["GOEXPERIMENT"])
	}
	if len(cp.SourcePaths) != 1 || cp.SourcePaths[0] != gb.output {
		fail("COPY --from=%s %v, but go build writes %q", cp.From, cp.SourcePaths, gb.output)
	}
	binary := cp.DestPath
	if strings.HasSuffix(binary, "/") {
		binary = path.Join(binary, path.Base(gb.output))
	}

	// USER: the distroless nonroot uid, the same as the pod's runAsUser.
	if users := commands[*instructions.UserCommand](final); len(users) == 0 {
		fail("final stage sets no USER (it would run as root)")
	} else {
		user := users[len(users)-1].User
		if u, _, _ := strings.Cut(user, ":"); u != strconv.Itoa(nonrootUID) && u != "nonroot" {
			fail("USER %s, want %d or nonroot", user, nonrootUID)
		}
	}
	if ru := podSpec(s).SecurityContext.RunAsUser; ru == nil || *ru != nonrootUID {
		fail("the pod's runAsUser is not the image's uid %d", nonrootUID)
	}

	// ENTRYPOINT: exec form (there is no shell), the copied agentd.
	if eps := commands[*instructions.EntrypointCommand](final); len(eps) != 1 {
		fail("%d ENTRYPOINT instructions in the final stage, want 1", len(eps))
	} else {
		if eps[0].PrependShell {
			fail("ENTRYPOINT is in shell form; the image has no shell")
		}
		if len(eps[0].CmdLine) != 1 || eps[0].CmdLine[0] != binary || path.Base(binary) != "agentd" {
			fail("ENTRYPOINT %q, want [%q] (agentd)", eps[0].CmdLine, binary)
		}
	}
	if cmds := commands[*instructions.CmdCommand](final); len(cmds) != 1 || cmds[0].PrependShell || !slices.Equal(cmds[0].CmdLine, agentd(s).Args) {
		fail("CMD does not match the Deployment's args %q", agentd(s).Args)
	}

	// EXPOSE: exactly the container's ports.
	var exposed, declared []string
	for _, e := range commands[*instructions.ExposeCommand](final) {
		exposed = append(exposed, e.Ports...)
	}
	for _, p := range agentd(s).Ports {
		declared = append(declared, strconv.Itoa(int(p.ContainerPort)))
	}
	slices.Sort(exposed)
	slices.Sort(declared)
	if !slices.Equal(exposed, declared) {
		fail("EXPOSE %v, the Deployment declares %v", exposed, declared)
	}
	return errors.Join(errs...)
}

// mainGoVersion reads the go directive of the main module.
func mainGoVersion(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := goDirective.FindSubmatch(mod)
	if m == nil {
		t.Fatal("no go directive in ../go.mod")
	}
	return string(m[1])
}

func readDockerfile(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestDockerfile checks the image recipe (see checkDockerfile).
func TestDockerfile(t *testing.T) {
	if err := checkDockerfile(readDockerfile(t), load(t, "k8s/base"), mainGoVersion(t)); err != nil {
		t.Fatal(err)
	}
}

// TestDockerfileChecksCatchBreakage proves checkDockerfile can fail: each
// case changes one line of the real Dockerfile and must be refused.
func TestDockerfileChecksCatchBreakage(t *testing.T) {
	src := string(readDockerfile(t))
	s, goVersion := load(t, "k8s/base"), mainGoVersion(t)
	cases := map[string][2]string{
		"root user":             {"USER 65532:65532\n", ""},
		"cgo enabled":           {"CGO_ENABLED=0 go build", "CGO_ENABLED=1 go build"},
		"green tea collector":   {"GOEXPERIMENT=nogreenteagc CGO_ENABLED=0", "CGO_ENABLED=0"},
		"shell-form entrypoint": {`ENTRYPOINT ["/usr/local/bin/agentd"]`, "ENTRYPOINT /usr/local/bin/agentd"},
		"entrypoint elsewhere":  {`ENTRYPOINT ["/usr/local/bin/agentd"]`, `ENTRYPOINT ["/agentd"]`},
		"full base image":       {"FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:bookworm-slim"},
		"single stage":          {"FROM gcr.io/distroless/static-debian12:nonroot\nCOPY --from=build /out/agentd /usr/local/bin/agentd\n", ""},
		"go version drift":      {"ARG GO_VERSION=" + goVersion + "\n", "ARG GO_VERSION=1.20.1\n"},
		"copy misses binary":    {"COPY --from=build /out/agentd", "COPY --from=build /out/agent"},
		"port not exposed":      {"EXPOSE 8443 8444 9090", "EXPOSE 8443 8444"},
		"RUN in final stage":    {"USER 65532:65532\n", "USER 65532:65532\nRUN true\n"},
		"lint: casing":          {"FROM golang:${GO_VERSION}-bookworm AS build", "FROM golang:${GO_VERSION}-bookworm as build"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(src, c[0]) {
				t.Fatalf("the Dockerfile has no %q to change", c[0])
			}
			broken := strings.Replace(src, c[0], c[1], 1)
			if err := checkDockerfile([]byte(broken), s, goVersion); err == nil {
				t.Fatalf("accepted:\n%s", broken)
			} else {
				t.Logf("refused: %v", err)
			}
		})
	}
}

// TestDockerfileBuildsAStaticBinary runs the recipe's go build (its
// arguments and environment, with the output redirected) on the host, checks
// that the result is a static ELF (no interpreter, no shared libraries), and
// runs a one-shot task with it as uid 65532 from / with the image's bare
// environment, the way the container would: the supervisor re-execs the
// binary for its subagent.
func TestDockerfileBuildsAStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles agentd; skipped with -short")
	}
	d, err := parseDockerfile(readDockerfile(t))
	if err != nil {
		t.Fatal(err)
	}
	_, build, err := d.binaryCopy()
	if err != nil {
		t.Fatal(err)
	}
	gb, err := findGoBuild(build)
	if err != nil {
		t.Fatal(err)
	}

	// Not t.TempDir: its parent is private to root, and uid 65532 must be
	// able to exec the binary.
	dir, err := os.MkdirTemp("", "agentd-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "agentd")
	args := slices.Clone(gb.args)
	args[slices.Index(args, gb.output)] = bin
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	goCmd := exec.CommandContext(ctx, "go", args...)
	goCmd.Dir = ".."
	goCmd.Env = os.Environ()
	for k, v := range gb.env {
		goCmd.Env = append(goCmd.Env, k+"="+v)
	}
	if out, err := goCmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}

	// A one-shot run through the supervisor and a re-exec'd subagent.
	run := exec.CommandContext(ctx, bin, "run", "--instruction", "one two three")
	run.Dir = "/"
	run.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		run.SysProcAttr.Credential = &syscall.Credential{Uid: nonrootUID, Gid: nonrootUID}
	} else {
		t.Logf("not root: running as uid %d instead of %d", os.Geteuid(), nonrootUID)
	}
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	if run.Process != nil {
		pgid := run.Process.Pid
		t.Cleanup(func() {
			if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group %d still exists after the run (kill -0: %v)", pgid, err)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		})
	}
	if err != nil {
		t.Fatalf("agentd run: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if want := `has 3 words`; !strings.Contains(stdout.String(), want) {
		t.Errorf("agentd run printed %q, want it to contain %q", stdout.String(), want)
	}
}
