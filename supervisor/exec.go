package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
)

// Exec children (docs/ARCHITECTURE.md §5.7; §16, item 16, says where they
// depart from the original design): the gated exec self-tool runs a command
// outside the subagent protocol, with no control channel, folded into the same
// regime as a spawn:
//
//   - It is off unless Config.AllowExec, and a subagent may call it only when
//     its scope holds api.ExecRef, which narrows down the tree like any tool and
//     carries sensitive and egress in the Rule of Two (so the startup gate and
//     the chokepoint's trifecta check count it).
//   - It passes the chokepoint's caps (capsLocked: the tree not draining, the
//     parent's child cap, the tree's subagent cap, the spawn-rate bucket, the
//     tree-token ceiling; not max_depth, as an exec child never nests) and
//     becomes a node of the tree: a child of its caller, listed by Live as
//     KindExec, stopped with its caller's subtree.
//   - It is forked by the reaper's forker like every child, in its own process
//     group, with PR_SET_PDEATHSIG set by the fork itself (the forking thread
//     lives as long as the process, and the command cannot arm it), the
//     per-child rlimits, and an environment without any AGENT_ variable (no
//     subagent marker, no intelligence key). The reaper is its only waiter.
//   - Its deadline is mandatory: Config.ExecDeadline, or the shorter one the
//     call asks for, never past the caller's own. Only detector A (the deadline)
//     and the reap apply; no ping, no progress watchdog. The kill ladder stops
//     it with SIGTERM, KillGrace, SIGKILL.
//   - Its stdout and stderr are captured up to Config.ExecOutput bytes each;
//     the rest is read and dropped, and a note marks the cut. A process that
//     left the group (a double fork) and holds the pipes open does not hold the
//     answer: after the reap the pipes get ReapGrace, then are closed. Such a
//     process is out of reach of the group's signals; when it exits, the
//     subreaper reaps it as an orphan.

// execSpec is the command of an exec child.
type execSpec struct {
	path  string // argv[0] resolved
	argv  []string
	dir   string
	stdin *string // nil: /dev/null
}

// The refusal texts of the exec self-tool; the chokepoint's own refusals keep
// their text with "exec denied" in place of "spawn denied".
const (
	refuseExecOff        = "exec denied: exec is off (the operator did not allow it)"
	refuseExecNotGranted = "exec denied: this subagent's scope does not hold subagent/exec"
	refuseExecBadArgs    = "exec denied: bad arguments: "
)

// execRefusal turns a refusal of the chokepoint's caps into the exec tool's.
func execRefusal(spawnText string) string {
	if rest, ok := strings.CutPrefix(spawnText, "spawn denied: "); ok {
		return "exec denied: " + rest
	}
	return spawnText
}

// toolExec serves the exec self-tool: it admits the command through the
// chokepoint's caps, runs it as an exec child of caller and answers, once it
// has been reaped, with its exit and output (api.ExecResult). Every refusal
// is a tool result with isError set.
func (s *Supervisor) toolExec(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	log := s.nodeLogger(caller)
	if !s.cfg.AllowExec {
		log.Info("exec refused", "reason", refuseExecOff)
		return s.refused(ctx, refuseExecOff)
	}
	if !caller.payload.Scope.Holds(api.ExecRef) {
		log.Info("exec refused", "reason", refuseExecNotGranted)
		return s.refused(ctx, refuseExecNotGranted)
	}
	var args api.ExecArgs
	if len(raw) == 0 || json.Unmarshal(raw, &args) != nil {
		return s.refused(ctx, refuseExecBadArgs+`want {"argv": ["PROGRAM", "ARG", ...]}`)
	}
	if err := args.Validate(); err != nil {
		return s.refused(ctx, refuseExecBadArgs+err.Error())
	}
	path, err := lookPath(args.Argv[0], s.execEnv)
	if err != nil {
		return api.TextResult("exec: "+err.Error(), true)
	}
	spec := &execSpec{path: path, argv: args.Argv, dir: args.Dir}
	if args.Stdin != "" {
		spec.stdin = &args.Stdin
	}
	child, refusal := s.admitExec(caller, spec, args.TimeoutMS, time.Now())
	if refusal != "" {
		log.Info("exec refused", "reason", refusal)
		return s.refused(ctx, refusal)
	}
	s.admitted(ctx, child)
	attrs := []any{"child_path", child.payload.AgentPath, "child_task_id", child.handle, "deadline", child.payload.Limits.Deadline.String()}
	if caller.payload.Telemetry.LogContent {
		attrs = append(attrs, "argv", args.Argv)
	}
	log.Info("exec admitted", attrs...)
	if a, ok := s.cfg.Observer.(AdmissionObserver); ok {
		a.NodeAdmitted(child.info())
	}
	go s.run(child)
	select {
	case <-child.done:
	case <-ctx.Done():
		return api.TextResult("subagent.exec: the caller stopped before its exec child "+child.handle+" ended", true)
	}
	return execReport(child).ToolResult()
}

// admitExec admits an exec child of parent: the caps every child passes
// (capsLocked, without max_depth), a deadline within the exec deadline, the
// call's timeout and the parent's remaining time, and registration in the
// tree. It returns the child, not yet started, or a refusal.
func (s *Supervisor) admitExec(parent *node, spec *execSpec, timeoutMS int64, now time.Time) (*node, string) {
	t := parent.nest.tree
	caps := s.Caps()
	t.mu.Lock()
	defer t.mu.Unlock()
	nchildren, refusal := s.capsLocked(parent, caps, now, capCheck{})
	if refusal != "" {
		return nil, execRefusal(refusal)
	}
	left := parent.deadline.Sub(now)
	if left <= 0 {
		return nil, execRefusal(refuseDeadlinePassed)
	}
	d := s.cfg.ExecDeadline
	if timeoutMS > 0 && time.Duration(timeoutMS)*time.Millisecond < d {
		d = time.Duration(timeoutMS) * time.Millisecond
	}
	d = min(d, left)
	path := parent.payload.AgentPath + "." + strconv.Itoa(nchildren+1)
	payload := api.SpawnPayload{
		AgentID:   path,
		AgentPath: path,
		Depth:     parent.payload.Depth + 1,
		Contract:  api.OutputContract{Objective: "exec " + filepath.Base(spec.argv[0])},
		Limits:    api.Limits{Deadline: api.Duration(d)},
		Telemetry: childTelemetry(parent),
	}
	child := newNode(newID(), parent, payload)
	// From the admission's clock, so never past the parent's deadline; set
	// before the node is shared.
	child.deadline = now.Add(d)
	child.nest = nest{tree: t, disposition: api.DispositionSync, provider: localProvider, exec: spec}
	if refusal := s.registerLocked(parent, child); refusal != "" {
		return nil, execRefusal(refusal)
	}
	return child, ""
}

// execReport is an ended exec child's result as the exec tool answers it.
func execReport(c *node) api.ExecResult {
	var r api.ExecResult
	if err := json.Unmarshal(c.final.Distillate.Inline, &r); err != nil {
		r = api.ExecResult{Handle: c.handle, Status: c.final.Status, ExitCode: -1, Detail: c.final.Detail}
	}
	return r
}

// superviseExec runs an exec child from fork to reap: detector A and the kill
// ladder are all that watch it.
func (s *Supervisor) superviseExec(n *node, log *slog.Logger) api.SubagentResult {
	spec := n.nest.exec
	if n.stopping() {
		// Killed between its admission and now: it never starts.
		return execResult(n, api.ExecResult{Handle: n.handle, Status: api.StatusCancelled, ExitCode: -1, Detail: "cancelled before it started"}, nil)
	}
	began := time.Now()
	p, out, err := s.startExec(spec, log)
	if err != nil {
		log.Warn("exec failed to start", "err", err)
		return execResult(n, api.ExecResult{Handle: n.handle, Status: api.StatusCrashed, ExitCode: -1, Detail: "start: " + err.Error()}, nil)
	}
	defer p.release()
	log = log.With("pid", p.pid)
	log.Info("exec started", "deadline", n.payload.Limits.Deadline.String())
	n.setProc(p)
	if n.stopping() {
		// A ladder that ran before setProc did not see the process.
		s.kill(n, p, "stopped as it started")
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeStarted(n.info())
		s.cfg.Observer.NodeProgress(n.info()) // working from the fork
	}
	deadline := time.NewTimer(time.Until(n.deadline))
	defer deadline.Stop()
	abandoned := false
wait:
	for {
		select {
		case <-p.done:
			break wait
		case <-n.abandoned:
			abandoned = true
			break wait
		case <-deadline.C:
			log.Warn("exec deadline passed: killing it", "deadline", n.payload.Limits.Deadline.String())
			s.killSubtree(n, verdict{status: api.StatusDeadline, detail: fmt.Sprintf("exec deadline of %s passed", n.payload.Limits.Deadline)}, "exec deadline")
		}
	}
	stdout, stderr := out.collect(s.cfg.ReapGrace)
	r := api.ExecResult{
		Handle: n.handle, Stdout: stdout.text(), Stderr: stderr.text(),
		StdoutBytes: stdout.total, StderrBytes: stderr.total,
		DurationMS: time.Since(began).Milliseconds(),
	}
	n.mu.Lock()
	v := n.verdict
	n.mu.Unlock()
	switch {
	case abandoned:
		r.Status, r.ExitCode = api.StatusCrashed, -1
		r.Detail = "the process would not reap inside the kill budget"
	default:
		r.ExitCode = p.status.Code()
		if p.status.Status.Signaled() {
			r.Signal = unix.SignalName(p.status.Status.Signal())
		}
		if p.status.Status.ExitStatus() == 0 && !p.status.Status.Signaled() {
			r.Status = api.StatusCompleted
		} else {
			r.Status, r.Detail = api.StatusCrashed, p.status.String()
		}
	}
	if v != nil {
		r.Status = v.status
		if abandoned {
			r.Detail = v.detail + "; " + r.Detail
		} else {
			r.Detail = v.detail
		}
	}
	return execResult(n, r, v)
}

// execResult is the node result of an exec child: the ExecResult is its inline
// distillate, so subagent.status and resource.read on its handle report it.
func execResult(n *node, r api.ExecResult, v *verdict) api.SubagentResult {
	b, _ := json.Marshal(r)
	res := api.SubagentResult{Status: r.Status, Distillate: api.ResultBody{Inline: b}, Detail: r.Detail}
	if v != nil {
		res.Cause = v.cause
	}
	return res
}

// execOutput is the capture of an exec child's stdout and stderr.
type execOutput struct {
	stdout, stderr *capture
	stdin          *os.File // our end of its stdin, or nil
}

// startExec forks the command through the reaper in its own process group,
// with stdin from spec (or /dev/null) and stdout and stderr on pipes read by
// two captures.
func (s *Supervisor) startExec(spec *execSpec, log *slog.Logger) (*proc, *execOutput, error) {
	var files []*os.File // the child's ends, closed once it holds them
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var inR, inW *os.File
	var err error
	if spec.stdin != nil {
		if inR, inW, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("stdin pipe: %w", err)
		}
	} else if inR, err = os.Open(os.DevNull); err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	files = append(files, inR)
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inW)
		return nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	files = append(files, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inW, outR)
		return nil, nil, fmt.Errorf("stderr pipe: %w", err)
	}
	files = append(files, errW)
	attr := &syscall.ProcAttr{
		Dir:   spec.dir,
		Env:   s.execEnv,
		Files: []uintptr{inR.Fd(), outW.Fd(), errW.Fd()},
		// The forker's thread lives as long as the process, so the parent-death
		// signal fires only when the supervisor dies.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	exit := make(chan ExitStatus, 1)
	pid, err := theReaper.fork(spec.path, spec.argv, attr, exit)
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, nil, fmt.Errorf("%s: %w", spec.argv[0], err)
	}
	setRlimits(pid, procSpec{rlimitAS: s.cfg.RlimitAS, rlimitCPU: s.cfg.RlimitCPU}, log)
	p := &proc{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	p.spawned.Store(true) // nothing to deliver: it is working from the fork
	go func() {
		p.status = <-exit
		close(p.done)
	}()
	out := &execOutput{stdout: newCapture(outR, s.cfg.ExecOutput), stderr: newCapture(errR, s.cfg.ExecOutput), stdin: inW}
	if inW != nil {
		go func() {
			// A command that does not read its stdin fails this write once it
			// exits (EPIPE); collect closes the pipe if a leftover process holds
			// it open.
			_, _ = inW.WriteString(*spec.stdin)
			inW.Close()
		}()
	}
	return p, out, nil
}

// collect waits, at most grace after the reap, for both captures to reach EOF
// (a process outside the group may hold the pipes open), closes what is left
// and returns them.
func (o *execOutput) collect(grace time.Duration) (*capture, *capture) {
	t := time.NewTimer(grace)
	defer t.Stop()
	for _, c := range []*capture{o.stdout, o.stderr} {
		select {
		case <-c.done:
		case <-t.C:
		}
	}
	closeAll(o.stdin)
	o.stdout.stop()
	o.stderr.stop()
	return o.stdout, o.stderr
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// capture reads one output pipe to its end, keeping the first max bytes and
// counting the rest.
type capture struct {
	f    *os.File
	max  int
	done chan struct{} // closed when the reader has stopped

	mu    sync.Mutex // guards buf, total
	buf   []byte
	total int64
}

func newCapture(f *os.File, max int) *capture {
	c := &capture{f: f, max: max, done: make(chan struct{})}
	go c.read()
	return c
}

func (c *capture) read() {
	defer close(c.done)
	defer c.f.Close()
	chunk := make([]byte, 32<<10)
	for {
		n, err := c.f.Read(chunk)
		if n > 0 {
			c.mu.Lock()
			if room := c.max - len(c.buf); room > 0 {
				c.buf = append(c.buf, chunk[:min(n, room)]...)
			}
			c.total += int64(n)
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// stop ends the reader (closing the pipe unblocks it) and waits for it.
func (c *capture) stop() {
	c.f.Close()
	<-c.done
}

// text is what was kept, cut at a rune boundary, with a note when output was
// cut.
func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.buf
	if c.total <= int64(len(kept)) {
		return string(kept)
	}
	// A rune the cut split is dropped whole.
	for i := len(kept) - 1; i >= 0 && i >= len(kept)-utf8.UTFMax; i-- {
		if utf8.RuneStart(kept[i]) {
			if !utf8.FullRune(kept[i:]) {
				kept = kept[:i]
			}
			break
		}
	}
	return string(kept) + fmt.Sprintf("\n[agentd: output cut at %d bytes; %d more bytes were not kept]", len(kept), c.total-int64(len(kept)))
}

// errNotFound is lookPath's error for a program in no PATH directory.
var errNotFound = errors.New("not found in PATH")

// defaultPath is searched when the exec environment has no PATH, as a shell
// does.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// lookPath resolves a program name in the PATH of env (a name with a slash is
// used as it is). It reads the file system only; it starts nothing.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: %w", name, errNotFound)
}

// execEnv is the environment of exec children: the children's environment
// without any AGENT_ variable, so neither the subagent marker nor a secret
// meant for subagents (the intelligence key) reaches a command.
func execEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AGENT_") {
			out = append(out, kv)
		}
	}
	return out
}
