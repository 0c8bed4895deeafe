package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
)

// verdict is the supervisor's decision about how a node ends, taken before the
// process is gone (a deadline, a cancel, a protocol violation). The first
// verdict wins; it overrides the status the child reports, not its distillate.
type verdict struct {
	status api.TerminalStatus
	cause  string
	detail string
}

// node is one subagent in a tree. handle, parent, payload and deadline are
// fixed by newNode (the deadline already capped); only the payload's Telemetry
// block is pointed at the spawn span afterwards, under mu, before the node's
// goroutine starts.
type node struct {
	handle   string
	parent   *node
	payload  api.SpawnPayload
	deadline time.Time
	done     chan struct{} // closed once the node has ended: its process reaped (or abandoned)
	// settled is closed once final is set, which is at the latest when done
	// closes and, for a child whose result frame arrived, as soon as that
	// frame is read (settle): the result is final from then on, while the
	// process may still be exiting. final never changes once settled closes.
	settled    chan struct{}
	settleOnce sync.Once
	final      api.SubagentResult

	mu        sync.Mutex // guards proc, verdict, result, usage, children, killing, ask
	proc      *proc
	verdict   *verdict
	result    *api.SubagentResult
	usage     api.Usage
	children  []*node
	killing   bool          // a kill ladder has been started for this node
	ask       askState      // the question it waits on (ask.go)
	hold      holdState     // its suspension while it waits (suspend.go)
	killed    chan struct{} // closed when killing is set
	abandoned chan struct{} // closed (once, by its ladder) when the ladder gives up on an unreapable process

	nest nest // nesting bookkeeping (tree.go, spawn.go)

	// budgeted: the node holds a slot of Config.Budget (capacity.go); set at
	// admission, before the node's goroutine starts, never changed.
	budgeted bool

	// span is the spawn span, from admission to reap (observe.go); set before
	// the node's goroutine starts, ended by it.
	span trace.Span
	// payloadBytes is the payload's encoded size, for the memory policy
	// (memory.go); 0 until it is first needed.
	payloadBytes atomic.Int64

	// objectiveFrom reads the objective back (a root's StartRequest's, a
	// nested subagent's ObjectiveKeeper's); set before the node's goroutine
	// starts, never changed. objectiveLeft (under mu): the payload's
	// objective is only its head (objective.go).
	objectiveFrom func(context.Context) (string, error)
	objectiveLeft bool
}

func newNode(handle string, parent *node, p api.SpawnPayload) *node {
	return &node{
		handle:    handle,
		parent:    parent,
		payload:   p,
		deadline:  time.Now().Add(p.Limits.Deadline.D()),
		done:      make(chan struct{}),
		settled:   make(chan struct{}),
		abandoned: make(chan struct{}),
		killed:    make(chan struct{}),
		ask:       askState{moved: make(chan struct{}, 1)},
	}
}

func (n *node) root() *node {
	for n.parent != nil {
		n = n.parent
	}
	return n
}

func (n *node) info() NodeInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	in := NodeInfo{
		Handle:     n.handle,
		RootHandle: n.root().handle,
		RunID:      n.payload.Telemetry.RunID,
		AgentID:    n.payload.AgentID,
		AgentPath:  n.payload.AgentPath,
		Depth:      n.payload.Depth,
		Objective:  n.payload.Contract.Objective,
		Usage:      n.usage,
		MaxTokens:  n.payload.Limits.MaxTokens,
		Deadline:   n.deadline,
	}
	in.Provider, in.Disposition = n.nest.provider, n.nest.disposition
	in.Traceparent = n.payload.Telemetry.Traceparent
	in.LogContent = n.payload.Telemetry.LogContent
	in.Kind = KindSubagent
	if n.nest.exec != nil {
		in.Kind = KindExec
	}
	if n.parent != nil {
		in.ParentHandle = n.parent.handle
	}
	switch {
	case (n.nest.remote || n.nest.workflow != nil) && !n.killing:
		in.State = StateRunning
	case n.proc == nil || !n.proc.spawned.Load():
		in.State = StateStarting
	case n.killing:
		in.State = StateStopping
	default:
		in.State = StateRunning
	}
	if n.nest.remote && n.hold.remoteHeld != nil && n.hold.remoteRun == nil {
		in.State = StateSuspended // its delegation's follow ended until its answer (suspend.go)
		return in
	}
	if sp := n.hold.suspended; sp != nil && sp == n.proc && sp.exited() {
		in.State = StateSuspended // no process until its answer (suspend.go)
		return in
	}
	if n.proc != nil {
		in.PID = n.proc.pid
		if in.State == StateRunning {
			l := &n.proc.live
			in.Health = l.health()
			if in.Health != "" {
				in.LastProgress = l.lastProgress()
				in.MissedPings = int(l.missed.Load())
			}
		}
	}
	return in
}

func (n *node) getProc() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// setProc records the started process.
func (n *node) setProc(p *proc) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proc = p
}

// stopping reports whether a kill ladder has been requested for n.
func (n *node) stopping() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.killing
}

func (n *node) setVerdict(v verdict) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.verdict == nil {
		n.verdict = &v
	}
}

// subtree returns n and its descendants, deepest first.
func (n *node) subtree() []*node {
	var levels [][]*node
	cur := []*node{n}
	for len(cur) > 0 {
		levels = append(levels, cur)
		var next []*node
		for _, m := range cur {
			m.mu.Lock()
			next = append(next, m.children...)
			m.mu.Unlock()
		}
		cur = next
	}
	var out []*node
	for i := len(levels) - 1; i >= 0; i-- {
		out = append(out, levels[i]...)
	}
	return out
}

// run supervises one node from spawn to reap and publishes its result.
//
// This goroutine waits through the child's whole life, so what its frames
// hold while it waits is what its stack keeps: run, supervise,
// superviseProcess and deliver keep the work before and after the wait in
// helpers of their own (ended, startCold, sendPayload, deadlinePassed),
// not inlined, so the waiting frames stay small enough for the collector to
// halve the stack the spawn grew (a goroutine's stack shrinks only while it
// uses under a quarter of it: 16 to 8 KiB a child, issue 35;
// TestMemoryPerChild).
func (s *Supervisor) run(n *node) {
	defer s.wg.Done()
	log := s.nodeLogger(n)
	var res api.SubagentResult
	if s.holdWhilePaused(n) {
		res = s.supervise(n, log)
	} else {
		res = heldResult(n)
	}
	s.ended(n, res, log)
}

// ended publishes n's result once its supervision is over, and removes it.
//
//go:noinline
func (s *Supervisor) ended(n *node, res api.SubagentResult, log *slog.Logger) {
	s.forgetPause(n)
	s.forgetSteer(n)
	s.releaseSlot(n)       // reaped (or abandoned): the service-wide slot is free again
	res = s.settle(n, res) // the result settled at its frame, if it did, stands
	if n.parent == nil {
		// The task has ended: its blobs now live out their retention window.
		s.blobs.Release(n.handle)
	}
	var exit string
	switch p := n.getProc(); {
	case p != nil:
		exit = exitString(p)
	case n.nest.remote:
		exit = "remote: " + n.nest.provider // no process of ours
	case n.nest.workflow != nil:
		exit = "workflow: no process"
	default:
		exit = "never started"
	}
	if n.nest.exec != nil {
		log.Info("exec ended", "status", res.Status, "depth", n.payload.Depth, "exit", exit)
	} else {
		log.Info("subagent ended", "status", res.Status, "cause", res.Cause, "tokens", res.Usage.Tokens(), "steps", res.Usage.Steps, "depth", n.payload.Depth, "exit", exit)
	}
	endSpawnSpan(n, res)
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeFinished(n.info(), res)
	}
	// Removed after the observer heard of the end, so a cancel by handle in
	// between still finds the node rather than a task with no subagent.
	s.mu.Lock()
	delete(s.nodes, n.handle)
	s.mu.Unlock()
	last := s.nodeDone(n)
	if last && n.parent != nil {
		// A detached descendant outlived the root: what it stored after the
		// task ended starts its retention window now.
		s.blobs.Release(n.nest.tree.root.handle)
	}
	close(n.done)
	n.nest.tree.change() // the tree may now be a waiting tree (suspend.go)
	if last {
		close(n.nest.tree.done)
	}
}

// supervise runs the child's whole life and returns its final result.
func (s *Supervisor) supervise(n *node, log *slog.Logger) api.SubagentResult {
	if n.nest.remote {
		return s.superviseRemote(n, log)
	}
	if n.nest.workflow != nil {
		return s.superviseWorkflow(n, log)
	}
	if n.nest.exec != nil {
		return s.superviseExec(n, log)
	}
	for {
		res, again := s.afterProcess(n, s.superviseProcess(n, log), log)
		if !again {
			return res
		}
	}
}

// superviseProcess runs one process of a subagent, from its start to its
// reap (a suspended subagent has more than one, suspend.go).
func (s *Supervisor) superviseProcess(n *node, log *slog.Logger) api.SubagentResult {
	// A warm child from the pool is already past ctrl/ready; it gets the
	// node's logger and, below, its payload.
	if p, log := s.takeWarm(n, log); p != nil {
		defer p.release()
		defer s.pool.taken() // reaped: refill now if the delay has not yet
		return s.deliver(n, p, log)
	}
	p, log, res, ok := s.startCold(n, log)
	if p == nil {
		return res
	}
	defer p.release()
	if !ok {
		return res
	}
	return s.deliver(n, p, log)
}

// takeWarm gives n a warm child from the pool, if there is one, with the
// node's logger; it returns nil if the pool has none.
//
//go:noinline
func (s *Supervisor) takeWarm(n *node, log *slog.Logger) (*proc, *slog.Logger) {
	p := s.pool.take()
	if p == nil {
		return nil, log
	}
	p.log.Store(log)
	log = log.With("pid", p.pid, "warm", true)
	log.Debug("spawn served by the warm pool")
	n.setProc(p)
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeStarted(n.info())
	}
	return p, log
}

// startCold starts a new process for n and waits for its ctrl/ready. It
// returns the process (nil if none started: res says why), the node's
// logger with its pid, and whether it is ready for its payload (if not, res
// is the node's end and the process has been dealt with; the caller still
// releases it).
//
//go:noinline
func (s *Supervisor) startCold(n *node, log *slog.Logger) (*proc, *slog.Logger, api.SubagentResult, bool) {
	p, err := startProc(s.procSpec(log))
	if err != nil {
		log.Error("spawn failed", "err", err)
		return nil, log, api.SubagentResult{Status: api.StatusCrashed, Detail: err.Error(), Distillate: api.InlineText("")}, false
	}
	log = log.With("pid", p.pid)
	n.setProc(p)
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeStarted(n.info())
	}
	res, ok := s.awaitReady(n, p, log)
	return p, log, res, ok
}

// awaitReady waits for p's ctrl/ready, within SpawnReady. It reports false,
// with the node's end, if the child failed before it.
func (s *Supervisor) awaitReady(n *node, p *proc, log *slog.Logger) (api.SubagentResult, bool) {
	ready := time.NewTimer(s.cfg.SpawnReady)
	defer ready.Stop()
	select {
	case f, ok := <-p.frames:
		if !ok {
			if !errors.Is(p.readErr, io.EOF) {
				return s.killNow(n, p, verdict{status: api.StatusCrashed, cause: api.CauseProtocolViolation,
					detail: "protocol violation before ctrl/ready: " + p.readErr.Error()}, log), false
			}
			// EOF before ready: most likely a crash; let the reap say how it ended.
			select {
			case <-p.done:
				return s.finish(n, p, verdict{status: api.StatusCrashed, cause: api.CauseExitedWithoutResult,
					detail: "exited before ctrl/ready: " + p.exitStatus().String()}), false
			case <-ready.C:
				return s.killNow(n, p, verdict{status: api.StatusCrashed, cause: api.CauseSpawnTimeout,
					detail: "closed control-out before ctrl/ready"}, log), false
			}
		}
		if f.Method != api.MethodReady {
			return s.killNow(n, p, verdict{status: api.StatusCrashed, cause: api.CauseProtocolViolation,
				detail: fmt.Sprintf("first frame is %q, want %q", f.Method, api.MethodReady)}, log), false
		}
		p.ready.Store(true)
	case <-ready.C:
		return s.killNow(n, p, verdict{status: api.StatusCrashed, cause: api.CauseSpawnTimeout,
			detail: fmt.Sprintf("no ctrl/ready within %s", s.cfg.SpawnReady)}, log), false
	case <-p.done:
		return s.finish(n, p, verdict{status: api.StatusCrashed, cause: api.CauseExitedWithoutResult,
			detail: "exited before ctrl/ready: " + p.exitStatus().String()}), false
	}
	return api.SubagentResult{}, true
}

// deliver sends a ready child its payload and supervises it until the reap.
func (s *Supervisor) deliver(n *node, p *proc, log *slog.Logger) api.SubagentResult {
	if res, ok := s.sendPayload(n, p, log); !ok {
		return res
	}
	stopWatch := s.watch(n, p, log) // detectors B and C
	defer stopWatch()
	s.spawned(n, p)

	deadline := time.NewTimer(time.Until(n.deadline))
	defer deadline.Stop()
	var eofWait <-chan time.Time
	var health Health // the classifier's verdict at EOF
	frames := p.frames
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				frames = nil
				if errors.Is(p.readErr, io.EOF) {
					// EOF alone is not death: classify it, wait for the reap to
					// confirm it, and start the ladder if it does not come.
					stopWatch()
					health = s.controlClosed(p, log)
					t := time.NewTimer(s.cfg.DrainGrace)
					defer t.Stop()
					eofWait = t.C
					continue
				}
				log.Error("protocol violation: killing child", "err", p.readErr)
				s.violation(n, p.readErr.Error())
				continue
			}
			s.sawFrame(p, f)
			if err := s.handleFrame(n, p, f, log); err != nil {
				log.Error("protocol violation: killing child", "err", err)
				s.violation(n, err.Error())
				frames = nil
			} else if f.Method == api.MethodResult && n.suspendedProc() != p {
				// The child's last word: its outcome is final now, before
				// its exit and reap (which still end the node).
				s.settle(n, s.finish(n, p, verdict{}))
			}
		case <-p.done:
			s.drainFrames(n, p, frames, log)
			return s.finish(n, p, verdict{})
		case <-n.abandoned:
			return s.finish(n, p, verdict{})
		case <-n.ask.moved: // a question's wait ended: the deadline moved by it
			deadline.Reset(time.Until(n.deadlineNow()))
		case <-deadline.C:
			if n.waitsUncharged() {
				continue // re-armed when the wait ends (n.ask.moved)
			}
			if d := n.deadlineNow(); time.Now().Before(d) {
				deadline.Reset(time.Until(d)) // moved by the waits so far
				continue
			}
			s.deadlinePassed(n, log)
		case <-eofWait:
			eofWait = nil
			if n.suspendedProc() != p { // a suspension's own ladder reaps its process
				s.notExited(n, health, log)
			}
		}
	}
}

// sendPayload writes a ready child its spawn payload. It reports false, with
// the node's end, if the child is not to have it (a kill came first) or the
// write failed.
//
//go:noinline
func (s *Supervisor) sendPayload(n *node, p *proc, log *slog.Logger) (api.SubagentResult, bool) {
	if n.stopping() {
		// A kill was requested before the child had its payload: there is no work
		// to save, so it gets no ctrl/cancel, only the signal.
		return s.killNow(n, p, verdict{status: api.StatusCancelled, detail: "cancelled before start"}, log), false
	}
	// The payload as sent: resource_ref seed slices read now, for the child
	// to see as its slices; n.payload keeps the references.
	n.mu.Lock()
	payload := n.payload
	n.mu.Unlock()
	if err := n.wholeObjective(&payload); err != nil {
		return s.killNow(n, p, verdict{status: api.StatusCrashed, detail: "spawn payload: " + err.Error()}, log), false
	}
	payload.Seed = s.resolveSeed(n, payload.Seed, log)
	payload.Intelligence.Breakers = s.intel.breakersFor(payload.Intelligence)
	if r := n.takeResume(); r != nil { // a suspended subagent goes on (suspend.go)
		payload.Resume = r
		payload.Limits.Deadline = api.Duration(time.Until(n.deadlineNow()))
	}
	if err := p.w.Send(api.MethodSpawn, 0, payload); err != nil {
		return s.killNow(n, p, verdict{status: api.StatusCrashed, detail: "write spawn payload: " + err.Error()}, log), false
	}
	payload = api.SpawnPayload{} // the child has it
	n.leaveObjective()
	p.spawned.Store(true)
	return api.SubagentResult{}, true
}

// spawned is what follows a child's payload, its detectors started: a pause
// or steers that came before it, and the observer's word.
//
//go:noinline
func (s *Supervisor) spawned(n *node, p *proc) {
	s.syncPause(n, p) // a child spawned while paused holds before its first model call
	s.sendEarlySteers(n, p)
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeProgress(n.info())
	}
}

// deadlinePassed kills n's subtree at its deadline.
//
//go:noinline
func (s *Supervisor) deadlinePassed(n *node, log *slog.Logger) {
	log.Warn("deadline passed: killing subtree", "deadline", n.payload.Limits.Deadline.String())
	s.killSubtree(n, verdict{status: api.StatusDeadline, detail: fmt.Sprintf("deadline of %s passed", n.payload.Limits.Deadline)}, "deadline")
}

// violation kills a child that broke the protocol at once (SIGKILL, no ladder)
// and runs the ladder on its descendants.
func (s *Supervisor) violation(n *node, detail string) {
	s.killAtOnce(n, verdict{status: api.StatusCrashed, cause: api.CauseProtocolViolation, detail: "protocol violation: " + detail}, "protocol violation")
}

// killNow SIGKILLs a child that failed before it started working and waits for
// the reap (bounded by ReapGrace).
func (s *Supervisor) killNow(n *node, p *proc, v verdict, log *slog.Logger) api.SubagentResult {
	s.judge(n, v)
	s.kill(n, p, v.detail)
	if !waitAll([]*proc{p}, s.cfg.ReapGrace) && s.unreapable(p) {
		log.Error("process would not reap", "pid", p.pid)
	}
	return s.finish(n, p, v)
}

// drainFrames handles frames still buffered after the reap (the result frame
// usually arrives this way), bounded by ReapGrace in case a grandchild holds
// control-out open.
func (s *Supervisor) drainFrames(n *node, p *proc, frames <-chan *api.Frame, log *slog.Logger) {
	if frames == nil {
		return
	}
	t := time.NewTimer(s.cfg.ReapGrace)
	defer t.Stop()
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				if !errors.Is(p.readErr, io.EOF) {
					n.setVerdict(verdict{status: api.StatusCrashed, cause: api.CauseProtocolViolation, detail: "protocol violation: " + p.readErr.Error()})
				}
				return
			}
			if err := s.handleFrame(n, p, f, log); err != nil {
				n.setVerdict(verdict{status: api.StatusCrashed, cause: api.CauseProtocolViolation, detail: "protocol violation: " + err.Error()})
				return
			}
		case <-t.C:
			return
		}
	}
}

// settle makes res n's final result unless n has settled already, and
// returns the final result. A node settles once: at its result frame (the
// child's last word, read and validated), or at its end. What comes after
// the settling (a verdict, a frame that breaks the protocol, the exit
// status) still drives the kill ladder and the reap, and is logged and
// counted, but no longer changes the result: whoever was given it (a task
// that completed, a parent) keeps what it was given.
func (s *Supervisor) settle(n *node, res api.SubagentResult) api.SubagentResult {
	n.settleOnce.Do(func() {
		n.final = res
		close(n.settled)
	})
	return n.final
}

// finish combines the verdict, the child's result and the supervisor's own
// usage count into the final result. fallback is used when neither a verdict
// nor a result exists.
func (s *Supervisor) finish(n *node, p *proc, fallback verdict) api.SubagentResult {
	n.mu.Lock()
	defer n.mu.Unlock()
	var res api.SubagentResult
	if n.result != nil {
		res = *n.result
	} else {
		res.Distillate = api.InlineText("")
	}
	// The supervisor's count is the truth: a child cannot report less than the
	// events it sent.
	res.Usage = maxUsage(res.Usage, n.usage)
	v := n.verdict
	if v == nil && n.result == nil {
		if fallback.status == "" {
			fallback = verdict{status: api.StatusCrashed, cause: api.CauseExitedWithoutResult, detail: "exited without a result: " + p.exitStatus().String()}
		}
		v = &fallback
	}
	if v != nil {
		res.Status, res.Cause, res.Detail = v.status, v.cause, v.detail
	}
	return res
}

func maxUsage(a, b api.Usage) api.Usage {
	if b.TokensIn > a.TokensIn {
		a.TokensIn = b.TokensIn
	}
	if b.TokensOut > a.TokensOut {
		a.TokensOut = b.TokensOut
	}
	if b.Steps > a.Steps {
		a.Steps = b.Steps
	}
	return a
}

// handleFrame processes one upward frame. An error is a protocol violation.
func (s *Supervisor) handleFrame(n *node, p *proc, f *api.Frame, log *slog.Logger) error {
	switch f.Method {
	case api.MethodEvent:
		var ev api.LoopEvent
		if err := api.DecodeParams(f, &ev); err != nil {
			return err
		}
		if ev.UsageDelta.TokensIn < 0 || ev.UsageDelta.TokensOut < 0 || ev.UsageDelta.Steps < 0 {
			return errors.New("loop/event with negative usage")
		}
		if ev.Kind == api.EventText {
			s.text(n, ev)
			return nil
		}
		if ev.Kind == api.EventSteered {
			s.steerTaken(n)
			return nil
		}
		n.mu.Lock()
		n.usage = n.usage.Add(ev.UsageDelta)
		used := n.usage.Tokens()
		n.mu.Unlock()
		s.account(n, ev.UsageDelta, used, log)
		if s.cfg.Observer != nil {
			s.cfg.Observer.NodeProgress(n.info())
		}
		if so, ok := s.cfg.Observer.(StepObserver); ok && ev.Kind == api.EventModel {
			so.NodeStep(n.info(), api.Step{At: time.Now().UTC(), Kind: api.StepModel, Step: ev.Step,
				TokensIn: ev.UsageDelta.TokensIn, TokensOut: ev.UsageDelta.TokensOut, DurationMS: ev.DurationMS, Endpoint: ev.Endpoint})
		}
	case api.MethodToolCall:
		if f.ID == 0 {
			return errors.New("tool/call without an id")
		}
		call, err := api.DecodeToolCall(f) // its args share the frame's body, read afresh (framepoll.go)
		if err != nil {
			return err
		}
		go s.serveTool(n, p, f.ID, call, log)
	case api.MethodResult:
		var r api.SubagentResult
		if err := api.DecodeParams(f, &r); err != nil {
			return err
		}
		if err := r.Validate(); err != nil {
			return err
		}
		n.mu.Lock()
		dup := n.result != nil
		n.result = &r
		n.mu.Unlock()
		if dup {
			return errors.New("a second result frame")
		}
	case api.MethodBlobPut:
		if f.ID == 0 {
			return errors.New("blob/put without an id")
		}
		var put api.BlobPut
		if err := api.DecodeParams(f, &put); err != nil {
			return err
		}
		go s.serveBlobPut(n, p, f.ID, put, log)
	case api.MethodIntelligence:
		var r api.IntelligenceReport
		if err := api.DecodeParams(f, &r); err != nil {
			return err
		}
		s.intel.note(n.payload.Intelligence, r, log)
	case api.MethodPong:
	case api.MethodReady:
		return errors.New("ctrl/ready sent twice")
	default:
		log.Warn("ignoring unknown control method", "method", f.Method)
	}
	return nil
}

// serveTool answers one tool/call. Every refusal is a tool result with isError,
// never a protocol error.
func (s *Supervisor) serveTool(n *node, p *proc, id uint64, call api.ToolCall, log *slog.Logger) {
	defer p.live.toolCall()() // Detector B waits while the supervisor serves the call
	ctx, span := startToolSpan(n, call)
	began := time.Now()
	if call.Tool == api.ToolAsk {
		n.holdConversation(call.Conversation) // suspend.go
	}
	res := s.callTool(ctx, n, call)
	endToolSpan(span, res)
	if so, ok := s.cfg.Observer.(StepObserver); ok {
		so.NodeStep(n.info(), toolStep(call, res, began))
	}
	if call.Tool == api.ToolAsk && n.resumeWith(p, res) {
		return // p was suspended: the node's next process starts from this result
	}
	if err := p.w.Respond(id, res); err != nil {
		log.Warn("tool/call response not delivered", "tool", call.Tool, "err", err)
	}
}

// serveBlobPut stores a distillate for n's tree and answers with its uri, or
// with an error the child can act on (it then inlines a truncated distillate).
func (s *Supervisor) serveBlobPut(n *node, p *proc, id uint64, put api.BlobPut, log *slog.Logger) {
	resp, err := s.blobPutAnswer(n, id, put, log)
	if err == nil {
		err = p.w.Write(resp)
	}
	if err != nil {
		log.Warn("blob/put response not delivered", "err", err)
	}
}

func (s *Supervisor) blobPutAnswer(n *node, id uint64, put api.BlobPut, log *slog.Logger) (*api.Frame, error) {
	b, err := s.blobs.Put(n.root().handle, n.nest.tree.caller, n.payload.Telemetry.RunID, put.MediaType, []byte(put.Content), false)
	if err != nil {
		log.Warn("blob/put refused", "err", err)
		return api.NewErrorResponse(id, api.CodeRefused, err.Error()), nil
	}
	log.Info("blob stored", "blob_id", b.ID, "bytes", len(b.Content))
	return api.NewResponse(id, api.BlobRef{URI: api.BlobURI(b.ID), Size: len(b.Content)})
}

// callTool runs one tool call for n: a self-tool, or a scoped tool the node's
// grant holds, on the tool server that serves it. ctx carries the call's span;
// the call ends at n's deadline or when n ends.
func (s *Supervisor) callTool(ctx context.Context, n *node, call api.ToolCall) api.ToolResult {
	var cancel context.CancelFunc
	if call.Tool == api.ToolAsk && !s.cfg.AskChargesDeadline {
		ctx, cancel = context.WithCancel(ctx) // the wait does not count against the deadline (ask.go)
	} else {
		ctx, cancel = context.WithDeadline(ctx, n.deadlineNow())
	}
	defer cancel()
	go func() { // a call outlives no caller: it ends when the node does
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if s.cfg.Gates.holds(call) && s.grants(n, call) {
		if denied := s.approve(ctx, n, call); denied != nil {
			return *denied
		}
	}
	if h, ok := s.selfTools[call.Tool]; ok {
		if !n.payload.Agent.AllowsSelfTool(call.Tool) {
			return api.TextResult(fmt.Sprintf("tool %q is not one of this subagent's agent type's self-tools", call.Tool), true)
		}
		return h(ctx, n, call.Args)
	}
	ref, ok := api.ParseToolRef(call.Tool)
	if !ok || !n.payload.Scope.Holds(ref) {
		return api.TextResult(fmt.Sprintf("tool %q is not in this subagent's scope", call.Tool), true)
	}
	switch {
	case ref == api.ExecRef:
		return api.TextResult(fmt.Sprintf("%s grants the exec self-tool: call %s", ref, api.ToolExec), true)
	case ref.Tool == api.ResourcesTool:
		return api.TextResult(fmt.Sprintf("%s grants reads of %s's resources: call %s", ref, ref.Server, api.ToolResourceRead), true)
	}
	srv, ok := s.cfg.Tools[ref.Server]
	if !ok {
		return api.TextResult(fmt.Sprintf("tool server %q is not configured", ref.Server), true)
	}
	return srv.Call(ctx, n.info(), ref.Tool, call.Args)
}

// toolStep is the api.StepTool record of a tool call served from began. Only
// the head of the arguments that a step keeps is copied out of them: a
// spawn's arguments carry the child's whole objective.
func toolStep(call api.ToolCall, res api.ToolResult, began time.Time) api.Step {
	head := call.Args
	if len(head) > api.MaxStepText {
		head = head[:api.MaxStepText+1] // ClipStepText looks at the byte after its limit
	}
	args, cutA := api.ClipStepText(string(head))
	cutA += len(call.Args) - len(head)
	text := res.Text()
	if text == "" && len(res.StructuredContent) > 0 {
		text = string(res.StructuredContent)
	}
	result, cutR := api.ClipStepText(text)
	return api.Step{At: began.UTC(), Kind: api.StepTool, Tool: call.Tool, Args: args, Result: result, IsError: res.IsError,
		DurationMS: time.Since(began).Milliseconds(), Cut: cutA + cutR}
}
