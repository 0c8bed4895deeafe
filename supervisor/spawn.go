package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
)

// The refusal texts of the subagent.spawn chokepoint. Each is returned to the
// parent's model as a tool result with isError set, never as a protocol error.
const (
	refuseDraining       = "spawn denied: tree draining"
	refuseChildCap       = "spawn denied: node child cap reached"
	refuseTreeCap        = "spawn denied: tree subagent cap reached"
	refuseRate           = "spawn denied: spawn rate exceeded"
	refuseCeiling        = "spawn denied: tree token ceiling"
	refuseScopeWidens    = "spawn denied: scope widens: " // + SERVER/TOOL
	refuseTrifecta       = "spawn denied: rule of two: the scope would hold untrusted_input, sensitive and egress"
	refuseGrantExhausted = "spawn denied: the parent's token grant is exhausted"
	refuseDeadlinePassed = "spawn denied: the parent's deadline has passed"
)

func refuseDepth(max int) string    { return fmt.Sprintf("spawn denied: max_depth %d reached", max) }
func refuseInflight(max int) string { return fmt.Sprintf("spawn denied: max_inflight %d reached", max) }

// toolSpawn serves subagent.spawn: the only way a subagent comes to have
// children. It admits or refuses the request (admit), starts the child, and
// answers according to the disposition.
func (s *Supervisor) toolSpawn(ctx context.Context, parent *node, raw json.RawMessage) api.ToolResult {
	log := s.nodeLogger(parent)
	args, err := decodeSpawnArgs(raw)
	if err != nil {
		return s.refused(ctx, refuseBadArguments+err.Error())
	}
	child, refusal := s.admit(parent, args, time.Now())
	if refusal != "" {
		log.Info("spawn refused", "reason", refusal)
		return s.refused(ctx, refusal)
	}
	s.admitted(ctx, child)
	log.Info("subagent spawned", "child_path", child.payload.AgentPath, "child_task_id", child.handle,
		"disposition", string(child.nest.disposition), "provider", child.nest.provider,
		"max_tokens", child.payload.Limits.MaxTokens, "deadline", child.payload.Limits.Deadline.String())
	if a, ok := s.cfg.Observer.(AdmissionObserver); ok {
		in := child.info()
		a.NodeAdmitted(in)
		if k, ok := a.(ObjectiveKeeper); ok {
			child.objectiveFrom = k.KeptObjective(in) // before its goroutine starts
		}
	}
	go s.run(child)
	if child.nest.disposition != api.DispositionSync {
		return childReport(child).ToolResult()
	}
	_, asked := child.asking()
	select {
	case <-child.done:
		return childReport(child).ToolResult()
	case <-asked: // its report in state asking: answer it, then await it
		return childReport(child).ToolResult()
	case <-ctx.Done():
		return api.TextResult("subagent.spawn: the caller stopped before its child "+child.handle+" ended", true)
	}
}

func decodeSpawnArgs(raw json.RawMessage) (*api.SpawnArgs, error) {
	var args api.SpawnArgs
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("want an object with a contract")
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, err
	}
	d, err := args.Disposition.Normalize()
	if err != nil {
		return nil, err
	}
	args.Disposition = d
	return &args, nil
}

// admit is the chokepoint. In this order it mints the child's depth from its
// parent's record (whatever the request says about depth, agent_id, agent_path
// or parent is discarded); runs the caps every child passes (capsLocked: the
// tree not draining, max_depth or the tree's remaining mesh depth, the
// parent's child cap, max_inflight for an async child, the tree's subagent
// cap, the spawn-rate bucket, the tree-token ceiling); rejects an empty
// objective; narrows the scope (every requested tool must be
// held by the parent, and no child may hold the Rule-of-Two trifecta); clamps
// the limits to what the parent and the tree can still afford; takes a slot
// of the service-wide process bound for a local child (Config.Budget); and
// finally registers the child, not yet started. The checks and the registration happen
// under tree.mu, so concurrent spawns in one tree cannot overshoot a cap.
func (s *Supervisor) admit(parent *node, args *api.SpawnArgs, now time.Time) (*node, string) {
	t := parent.nest.tree
	caps := s.Caps()
	t.mu.Lock()
	defer t.mu.Unlock()

	depth := parent.payload.Depth + 1 // minted; args.Depth is never read
	nchildren, refusal := s.capsLocked(parent, caps, now, capCheck{depth: depth, async: args.Disposition == api.DispositionAsync})
	if refusal != "" {
		return nil, refusal
	}
	if err := args.Contract.Validate(); err != nil {
		if errors.Is(err, api.ErrMissingObjective) {
			return nil, err.Error()
		}
		return nil, "spawn denied: " + err.Error()
	}
	scope, refusal := narrowScope(parent.payload.Scope, args.Scope)
	if refusal != "" {
		return nil, refusal
	}
	scope.Tags = intersectTags(ScopeTags(scope.Allow, s.cfg.ToolTags), parent.payload.Scope.Tags)
	if scope.Tags.Trifecta() {
		return nil, refuseTrifecta
	}
	seed := args.Seed.WithoutResolved() // the supervisor reads references when the child starts
	if err := seed.Validate(); err != nil {
		return nil, "spawn denied: " + err.Error()
	}
	limits, refusal := clampLimits(parent, args.Limits, caps, t.tokens, now)
	if refusal != "" {
		return nil, refusal
	}
	provider, remote := localProvider, false
	if p := strings.TrimSpace(args.Provider); p != "" && p != localProvider {
		if s.cfg.Delegator == nil {
			return nil, fmt.Sprintf(refuseUnknownProvider+"%q", p)
		}
		if !parent.payload.Agent.AllowsProvider(p) {
			return nil, fmt.Sprintf(refusePeerNotAllowed+"%q", p)
		}
		provider, remote = p, true
	}
	var agentType *api.AgentType
	if name := strings.TrimSpace(args.AgentType); name != "" {
		var ok bool
		if s.cfg.AgentTypes != nil {
			agentType, ok = s.cfg.AgentTypes(name)
		}
		if !ok {
			return nil, fmt.Sprintf(refuseUnknownAgentType+"%q", name)
		}
	}

	path := parent.payload.AgentPath + "." + strconv.Itoa(nchildren+parent.nest.spawnedBefore+1) // dense over admitted spawns
	payload := api.SpawnPayload{
		AgentID:      path,
		AgentPath:    path,
		Depth:        depth,
		Contract:     args.Contract,
		Seed:         seed,
		Scope:        scope,
		Limits:       limits,
		Telemetry:    childTelemetry(parent),
		Tools:        s.toolSpecs(scope.Allow),
		Intelligence: parent.payload.Intelligence,
		Agent:        parent.payload.Agent, // a child keeps its parent's type unless it names one
	}
	if agentType != nil {
		// After the narrowing and the clamp: a type only narrows further.
		agentType.Apply(&payload, parent.payload.Agent)
		payload.Scope.Tags = intersectTags(ScopeTags(payload.Scope.Allow, s.cfg.ToolTags), parent.payload.Scope.Tags)
		payload.Tools = s.toolSpecs(payload.Scope.Allow)
	}
	s.capDeadline(&payload) // already within the parent's remaining time, itself capped
	if err := payload.Validate(); err != nil {
		return nil, "spawn denied: " + err.Error()
	}
	if !remote {
		if err := s.fitsFrame(&payload); err != nil {
			return nil, "spawn denied: " + err.Error()
		}
	}
	child := newNode(newID(), parent, payload)
	child.nest = nest{tree: t, disposition: args.Disposition, provider: provider, remote: remote}
	if refusal := s.registerLocked(parent, child); refusal != "" {
		return nil, refusal
	}
	return child, ""
}

// capCheck says which of the chokepoint's caps a new child of a parent is
// held to beyond those every child is: depth, the depth it would have (zero:
// none, for an exec child, which never nests), and async, whether it takes an
// async slot (max_inflight).
type capCheck struct {
	depth int
	async bool
}

// capsLocked runs the checks every new child of parent passes, a subagent or
// an exec child alike, in the chokepoint's order: the tree not draining,
// max_depth (or the tree's remaining mesh depth, when smaller), the parent's
// child cap, max_inflight for an async child, the tree's subagent cap, the
// spawn-rate bucket and the tree-token ceiling. It returns the parent's child
// count (for the new child's agent path) or a refusal. The caller holds
// parent's tree.mu.
func (s *Supervisor) capsLocked(parent *node, caps Caps, now time.Time, c capCheck) (int, string) {
	t := parent.nest.tree
	if t.draining || s.Draining() || parent.stopping() {
		return 0, refuseDraining
	}
	if c.depth > 0 {
		maxDepth := caps.MaxDepth
		if t.depthCap >= 0 && t.depthCap < maxDepth {
			maxDepth = t.depthCap // a tree deep in the mesh nests only what is left
		}
		if c.depth > maxDepth {
			return 0, refuseDepth(maxDepth)
		}
	}
	// Every child ever admitted counts; children only attach here, under t.mu.
	parent.mu.Lock()
	nchildren := len(parent.children)
	parent.mu.Unlock()
	if nchildren >= childCap(parent, caps) {
		return 0, refuseChildCap
	}
	if c.async && parent.nest.inflight >= caps.MaxInflight {
		return 0, refuseInflight(caps.MaxInflight)
	}
	if t.total >= caps.MaxTotalSubagents {
		return 0, refuseTreeCap
	}
	if !t.bucket.take(s.cfg.Clock(), caps.SpawnBurst, caps.SpawnRate) {
		return 0, refuseRate
	}
	if t.tokens >= caps.TreeTokenCeiling {
		return 0, refuseCeiling
	}
	return nchildren, ""
}

// registerLocked takes the child's slot of the service-wide process bound
// (Config.Budget: a subagent or an exec child that runs as a local process),
// then attaches it to its parent and the tree, not yet started: the
// supervisor must not be draining and the parent must not be
// on a kill ladder, checked under the locks that Shutdown and killSubtree
// take, so a child is never attached behind their back. The caller holds the
// tree's mu.
func (s *Supervisor) registerLocked(parent, child *node) string {
	// The service-wide process bound, last: every per-tree check passed, so
	// a slot taken here is given back only if the registration fails.
	if !s.acquireSlot(child) {
		return refuseCapacity
	}
	t := parent.nest.tree
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		s.releaseSlot(child)
		return refuseDraining
	}
	parent.mu.Lock()
	if parent.killing {
		parent.mu.Unlock()
		s.mu.Unlock()
		s.releaseSlot(child)
		return refuseDraining
	}
	parent.children = append(parent.children, child)
	parent.mu.Unlock()
	s.nodes[child.handle] = child
	s.wg.Add(1)
	s.mu.Unlock()

	t.total++
	t.live++
	t.nodes[child.handle] = child
	if child.nest.disposition == api.DispositionAsync {
		parent.nest.inflight++
	}
	return ""
}

// childTelemetry is a new child's correlation block: its parent's run, trace
// context and log settings.
func childTelemetry(parent *node) api.Telemetry {
	pt := parent.payload.Telemetry
	return api.Telemetry{
		RunID: pt.RunID, TraceID: pt.TraceID, Traceparent: pt.Traceparent,
		LogLevel: pt.LogLevel, LogContent: pt.LogContent,
	}
}

// childCap is the breadth cap of n: the operator's max_children, or n's own
// grant when that is smaller.
func childCap(n *node, caps Caps) int {
	c := caps.MaxChildren
	if m := n.payload.Limits.MaxChildren; m > 0 && m < c {
		c = m
	}
	return c
}

// narrowScope returns the child's scope: exactly the requested tools, each of
// which the parent must hold. Capability never widens down the tree.
func narrowScope(parent, req api.ToolScope) (api.ToolScope, string) {
	var out api.ToolScope
	seen := make(map[api.ToolRef]bool, len(req.Allow))
	for _, r := range req.Allow {
		if r.Server == "" || r.Tool == "" || strings.Contains(r.Server, "/") {
			return out, "spawn denied: scope: a tool is {server, tool}, both non-empty"
		}
		if !parent.Holds(r) {
			return out, refuseScopeWidens + r.String()
		}
		if !seen[r] {
			seen[r] = true
			out.Allow = append(out.Allow, r)
		}
	}
	return out, ""
}

// clampLimits bounds what a child asks for by what its parent and its tree can
// still afford. An absent (zero) request takes the most that is affordable. The
// deadline is always finite: at most the parent's remaining time. The loop
// detector's repeats and the distillate budget are the parent's (the
// operator's --max-repeats and --distillate-budget hold for the whole tree).
func clampLimits(parent *node, req api.Limits, caps Caps, treeTokens int64, now time.Time) (api.Limits, string) {
	pl := parent.payload.Limits
	l := api.Limits{MaxSteps: pl.MaxSteps, MaxRepeats: pl.MaxRepeats, DistillateBudget: pl.DistillateBudget}
	if req.MaxSteps > 0 && req.MaxSteps < l.MaxSteps {
		l.MaxSteps = req.MaxSteps
	}
	parent.mu.Lock()
	used := parent.usage.Tokens()
	parent.mu.Unlock()
	afford := pl.MaxTokens - used
	if tree := caps.TreeTokenCeiling - treeTokens; tree < afford {
		afford = tree
	}
	if afford <= 0 {
		return l, refuseGrantExhausted
	}
	l.MaxTokens = afford
	if req.MaxTokens > 0 && req.MaxTokens < afford {
		l.MaxTokens = req.MaxTokens
	}
	left := parent.deadline.Sub(now)
	if left <= 0 {
		return l, refuseDeadlinePassed
	}
	if req.Deadline > 0 && req.Deadline.D() < left {
		left = req.Deadline.D()
	}
	if left > api.MaxDeadline {
		left = api.MaxDeadline
	}
	l.Deadline = api.Duration(left)
	l.MaxChildren = childCap(parent, caps)
	if req.MaxChildren > 0 && req.MaxChildren < l.MaxChildren {
		l.MaxChildren = req.MaxChildren
	}
	return l, ""
}

// AdmissionObserver is an optional interface of an Observer: NodeAdmitted is
// called once for every nested subagent the chokepoint admits, before its
// process starts and before its handle is returned to the parent, so whatever
// the observer records for a handle exists by the time anyone holds it.
type AdmissionObserver interface {
	NodeAdmitted(n NodeInfo)
}

// ObjectiveKeeper is an optional interface of an Observer that keeps what it
// is told of a nested subagent where it can be read back (a2abind's
// TreeObserver: the nested task's first message, in the task store).
// KeptObjective is asked right after NodeAdmitted; the reader it returns
// (nil: it keeps none) must give back n.Objective whole while the subagent
// lives. With one, a nested subagent's large objective is the keeper's
// once its child has it, as a root's is StartRequest.ObjectiveFrom's
// (objective.go): the node keeps its head.
type ObjectiveKeeper interface {
	KeptObjective(n NodeInfo) func(context.Context) (string, error)
}

// ToolDescriber is an optional interface of a ToolServer: it describes one of
// its tools, so a child's model is offered the tool with its schema.
type ToolDescriber interface {
	Describe(tool string) (api.ToolSpec, bool)
}

// toolSpecs describes the tools of a grant for the spawn payload: each scoped
// tool, and the exec self-tool when the grant holds api.ExecRef. A grant of an
// MCP server's resources (api.ResourcesTool) is no tool: resource.read, which
// every subagent has, serves it.
func (s *Supervisor) toolSpecs(allow []api.ToolRef) []api.ToolSpec {
	var out []api.ToolSpec
	for _, ref := range allow {
		if ref == api.ExecRef {
			out = append(out, api.ExecToolSpec())
			continue
		}
		if ref.Tool == api.ResourcesTool {
			continue
		}
		spec := api.ToolSpec{Name: ref.String()}
		if d, ok := s.cfg.Tools[ref.Server].(ToolDescriber); ok {
			if got, ok := d.Describe(ref.Tool); ok {
				spec.Description, spec.InputSchema = got.Description, got.InputSchema
			}
		}
		out = append(out, spec)
	}
	return out
}

// childReport describes a child for the self-tools.
func childReport(c *node) api.ChildReport {
	in := c.info()
	r := api.ChildReport{Handle: c.handle, ResourceURI: api.ResourceURI(c.handle), AgentPath: in.AgentPath, State: api.ChildRunning, Usage: in.Usage}
	if c.ended() {
		r.ReportResult(c.final)
	}
	return withQuestion(r, c)
}

// superviseRemote runs a child on a non-local provider through the Delegator.
// It counts against the same caps and budget as a local child (it was admitted
// by the same chokepoint), and its deadline is enforced here: on expiry, or
// when its subtree is killed, the delegation is cancelled.
func (s *Supervisor) superviseRemote(n *node, log *slog.Logger) api.SubagentResult {
	log = log.With("provider", n.nest.provider)
	ctx, cancel := context.WithCancel(trace.ContextWithSpan(context.Background(), n.span))
	defer cancel()
	// The child's text, as the peer streams it, goes where a local child's
	// goes (the Observer's NodeText), never into the parent's context; not
	// before the Observer heard the node start.
	started := make(chan struct{})
	ctx = withRemoteText(ctx, func(step int, text string) {
		select {
		case <-started:
			if ctx.Err() == nil { // not once the child's result is taken
				s.text(n, api.LoopEvent{Kind: api.EventText, Step: step, Text: text})
			}
		case <-ctx.Done():
		}
	})
	// The peer's questions are the child's (ask.go): its parent sees it
	// asking; the wait does not count against its deadline unless
	// Config.AskChargesDeadline (n.deadlineNow).
	ctx = withRemoteAsk(ctx, func(actx context.Context, q api.Question) (string, error) {
		select {
		case <-started:
		case <-actx.Done():
			return "", context.Cause(actx)
		}
		q.Handle = n.handle
		if q.AgentPath == "" {
			q.AgentPath = n.payload.AgentPath
		}
		return s.askRemote(ctx, actx, n, q)
	})
	var res api.SubagentResult
	for first := true; ; first = false {
		r, err := s.startRemote(ctx, n, log)
		if err != nil {
			return api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText(""), Detail: err.Error()}
		}
		if r == nil { // stopped or past its deadline while suspended
			n.mu.Lock()
			res = api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText(""), Detail: "stopped while suspended", Usage: n.usage}
			if n.verdict != nil {
				res.Status, res.Cause, res.Detail = n.verdict.status, n.verdict.cause, n.verdict.detail
			}
			n.mu.Unlock()
			return res
		}
		n.mu.Lock()
		n.hold.remoteRun = r
		n.mu.Unlock()
		untrack := s.trackRemote(n, r) // steer.go
		if s.cfg.Observer != nil {
			if first {
				s.cfg.Observer.NodeStarted(n.info())
			}
			s.cfg.Observer.NodeProgress(n.info())
		}
		if first {
			close(started)
		}
		res = s.followRemote(n, r, log)
		untrack()
		n.mu.Lock()
		n.hold.remoteRun = nil
		suspended := n.hold.remoteHeld != nil && n.verdict == nil && !n.killing
		n.mu.Unlock()
		if !suspended {
			break
		}
		log.Info("subagent suspended: its delegation's follow ended, its peer's task waits on")
		if s.cfg.Observer != nil {
			s.cfg.Observer.NodeProgress(n.info())
		}
	}
	return s.settleRemote(n, res, log)
}

// startRemote starts n's delegation: the first, or, for a child suspended
// (or restored from a stored waiting tree) while its peer's question waited,
// once the answer comes, a resumed one that sends it to the peer's task
// (RemoteResumer). It returns nil and no error when n was stopped, or its
// deadline passed, while it waited for the answer.
func (s *Supervisor) startRemote(ctx context.Context, n *node, log *slog.Logger) (Remote, error) {
	n.mu.Lock()
	from, answer := n.hold.remoteHeld, n.hold.remoteAnswer
	n.mu.Unlock()
	if from == nil {
		dctx, dcancel := context.WithDeadline(ctx, n.deadline) // starting it is bounded by the deadline
		defer dcancel()
		r, err := s.cfg.Delegator.Delegate(dctx, n.nest.provider, n.handle, n.payload)
		if err != nil {
			log.Warn("delegation failed", "err", err)
			return nil, fmt.Errorf("delegate to %s: %w", n.nest.provider, err)
		}
		return r, nil
	}
	rr, ok := s.cfg.Delegator.(RemoteResumer)
	if !ok {
		return nil, fmt.Errorf("resume the delegation to %s: its delegator cannot resume one", n.nest.provider)
	}
	var rep remoteReply
	stopped := false
	select {
	case rep = <-answer:
	case <-n.killed:
		stopped = true
	}
	d := n.deadlineNow()
	if !stopped && !time.Now().Before(d) {
		s.judge(n, verdict{status: api.StatusDeadline, detail: fmt.Sprintf("deadline of %s passed while suspended", n.payload.Limits.Deadline)})
		stopped = true
	}
	text := rep.text
	if rep.err != nil || stopped {
		// No answer: the resumed run sends none and cancels the peer's
		// task, as the live one would.
		text = ""
		log.Info("the peer's question got no answer while suspended", "err", rep.err, "stopped", stopped)
	}
	p := n.payload
	p.Limits.Deadline = api.Duration(max(time.Until(d), time.Millisecond))
	dctx, dcancel := context.WithTimeout(ctx, max(time.Until(d), s.cfg.DrainGrace+s.cfg.KillGrace))
	defer dcancel()
	r, err := rr.ResumeRemote(dctx, n.nest.provider, n.handle, p, *from, text)
	if stopped {
		n.mu.Lock()
		n.hold.remoteHeld, n.hold.remoteAnswer = nil, nil
		n.mu.Unlock()
		if err == nil {
			grace := time.NewTimer(s.cfg.DrainGrace + s.cfg.KillGrace)
			defer grace.Stop()
			select { // it cancels the peer's task
			case <-r.Done():
			case <-grace.C:
				r.Cancel("stopped while suspended")
			}
		}
		return nil, nil
	}
	n.mu.Lock()
	n.hold.remoteHeld, n.hold.remoteAnswer = nil, nil
	n.mu.Unlock()
	if err != nil {
		log.Warn("resuming the delegation failed", "err", err)
		return nil, fmt.Errorf("resume the delegation to %s: %w", n.nest.provider, err)
	}
	log.Info("subagent resumes: the answer goes to its peer's task", "remote_task_id", from.TaskID)
	return r, nil
}

// askRemote poses the peer's question q of n, a remote child whose run r
// asks under actx. The question waits in the supervisor under ctx (the
// child's), not the run's: when the tree is suspended meanwhile (the run
// detached, suspendTree), the answer is kept for n's next run.
func (s *Supervisor) askRemote(ctx, actx context.Context, n *node, q api.Question) (string, error) {
	ch := make(chan remoteReply, 1)
	pctx, pcancel := context.WithCancelCause(ctx)
	n.mu.Lock()
	n.hold.remoteAsking = true
	n.mu.Unlock()
	go func() {
		a, err := s.pose(pctx, n, q)
		pcancel(nil)
		ch <- remoteReply{text: a, err: err}
	}()
	var rep remoteReply
	got := false
	select {
	case rep = <-ch:
		got = true
	case <-actx.Done():
	}
	n.mu.Lock()
	n.hold.remoteAsking = false
	held := n.hold.remoteHeld != nil
	if held {
		if got {
			n.hold.remoteAnswer <- rep // cap 1; the one answer
		} else {
			n.hold.remoteAnswer = ch
		}
	}
	n.mu.Unlock()
	switch {
	case held:
		<-actx.Done() // suspendTree detaches the run: it ends without cancelling its peer's task
		return "", context.Cause(actx)
	case got:
		return rep.text, rep.err
	}
	pcancel(context.Cause(actx))
	<-ch
	return "", context.Cause(actx)
}

// followRemote waits for n's delegation r to end, enforcing n's deadline and
// its subtree's stop, and returns its result.
func (s *Supervisor) followRemote(n *node, r Remote, log *slog.Logger) api.SubagentResult {
	deadline := time.NewTimer(time.Until(n.deadlineNow()))
	defer deadline.Stop()
wait:
	for {
		select {
		case <-r.Done():
			break wait
		case <-n.killed:
			r.Cancel("stopped by the supervisor")
			break wait
		case <-n.ask.moved: // a question's wait ended: the deadline moved by it
			deadline.Reset(time.Until(n.deadlineNow()))
		case <-deadline.C:
			if n.waitsUncharged() {
				continue // re-armed when the wait ends (n.ask.moved)
			}
			if d := n.deadlineNow(); time.Now().Before(d) {
				deadline.Reset(time.Until(d))
				continue
			}
			log.Warn("deadline passed: cancelling the delegation", "deadline", n.payload.Limits.Deadline.String())
			s.killSubtree(n, verdict{status: api.StatusDeadline, detail: fmt.Sprintf("deadline of %s passed", n.payload.Limits.Deadline)}, "deadline")
			r.Cancel("deadline")
			break wait
		}
	}
	grace := time.NewTimer(s.cfg.DrainGrace + s.cfg.KillGrace)
	defer grace.Stop()
	select {
	case <-r.Done():
		return r.Result()
	case <-grace.C:
		log.Error("remote delegation did not stop after cancel")
		return api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText(""), Detail: "the remote delegation did not stop after cancel"}
	}
}

// settleRemote counts a remote child's usage against its tree and returns
// its result.
func (s *Supervisor) settleRemote(n *node, res api.SubagentResult, log *slog.Logger) api.SubagentResult {
	// The remote's usage counts against this tree.
	n.mu.Lock()
	delta := api.Usage{TokensIn: max(res.Usage.TokensIn-n.usage.TokensIn, 0), TokensOut: max(res.Usage.TokensOut-n.usage.TokensOut, 0)}
	n.usage = maxUsage(n.usage, res.Usage)
	used := n.usage.Tokens()
	n.mu.Unlock()
	s.account(n, delta, used, log)
	n.mu.Lock()
	defer n.mu.Unlock()
	res.Usage = n.usage
	if n.verdict != nil {
		res.Status, res.Cause, res.Detail = n.verdict.status, n.verdict.cause, n.verdict.detail
	}
	return res
}
