package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/blob"
)

// Config holds the supervisor's settings. Every timing is a value here so tests
// can run the whole kill ladder in milliseconds. The zero value of a field means
// its default.
type Config struct {
	// Executable is the binary re-exec'd for each child; default os.Executable().
	Executable string
	// Env is the environment children start with (the supervisor adds the
	// subagent marker and its own pid). Secrets for the child go here, never argv.
	Env []string
	// KeyEnv are more entries (VAR=value) subagents start with: the API keys
	// of declared endpoints, which SetKeyEnv replaces (keyenv.go). Exec
	// children never get them.
	KeyEnv []string
	// Logger receives the supervisor's log and the forwarded child logs.
	Logger *slog.Logger
	// Observer, if set, hears about every node's start, progress and end.
	Observer Observer
	// Tools are the tool servers by name (MCP servers); a child calls a tool as
	// SERVER/TOOL and only within its grant.
	Tools map[string]ToolServer
	// Caps are the chokepoint's limits; zero fields take DefaultCaps.
	Caps Caps
	// Blobs bounds the store of distillates too large to inline.
	Blobs blob.Config
	// Delegator, if set, starts nested spawns that name a non-local provider
	// (a remote A2A peer). cmd injects the delegation router's adapter, so this
	// package never imports delegate or a2a.
	Delegator Delegator
	// AgentTypes, if set, looks up a declared agent type a spawn names
	// (api.SpawnArgs.AgentType; the agents file, which SIGHUP may reload).
	// Nil: a spawn naming a type is refused.
	AgentTypes func(name string) (*api.AgentType, bool)
	// Budget, if set, bounds the live subagent processes across the service:
	// a nested local spawn takes a slot or is refused (capacity.go). Nil: no
	// service-wide bound, only the per-tree caps.
	Budget ProcessBudget
	// ToolTags gives the Rule-of-Two legs of each tool; nil, or a tool it does
	// not know, counts as untrusted_input.
	ToolTags ToolTagger
	// Clock is the time the spawn-rate token bucket reads; default time.Now.
	// Tests inject a fake one.
	Clock func() time.Time

	// MaxFrame is the control frame size limit, at both ends (children are
	// told it in api.EnvMaxFrame); default api.DefaultMaxFrame. A payload
	// that would not fit is refused before any child is taken for it.
	MaxFrame   int
	SpawnReady time.Duration // a child must send ctrl/ready within this; default 2s
	DrainGrace time.Duration // kill ladder: ctrl/cancel to SIGTERM; default 5s
	KillGrace  time.Duration // kill ladder: SIGTERM to SIGKILL; default 2s
	ReapGrace  time.Duration // after SIGKILL, how long to wait for the reap before reporting; default 1s

	RlimitAS  uint64 // per-child RLIMIT_AS in bytes; 0 inherits
	RlimitCPU uint64 // per-child RLIMIT_CPU in seconds; 0 inherits

	// ChildMemoryLimit, if positive, is every agentd child's Go memory limit
	// in bytes (GOMEMLIMIT in its environment): the share of memory a child
	// is admitted with, so a child near it collects harder and returns its
	// free pages before it grows past it. ChildGOGC, if positive, is every
	// agentd child's GOGC. Either, when set, replaces the variable Env carries
	// (the supervisor's own settings are for its heap, not a child's); exec
	// children keep Env's. ChildGOMAXPROCS, if positive, is every agentd
	// child's GOMAXPROCS the same way: each P holds spans, threads and GC
	// state of its own, and a child waits; a child whose spawn payload is
	// large returns to the runtime's default itself (internal/agent).
	ChildMemoryLimit int64
	ChildGOGC        int
	ChildGOMAXPROCS  int
	// ChildGODEBUG, if set, leads every agentd child's GODEBUG: the GODEBUG
	// Env carries (the operator's) follows it, so where both name a setting
	// the operator's wins (the runtime reads GODEBUG left to right); exec
	// children keep Env's alone.
	ChildGODEBUG string

	// ChildDeadline caps every child's deadline on top of its payload's
	// (Detector A); the child is told the capped value. Default 600s.
	ChildDeadline time.Duration
	// ExecDeadline is Detector A for exec children (the gated exec
	// self-tool): each gets this deadline, or the shorter one its call asks
	// for, never past its caller's own. Default 120s.
	ExecDeadline time.Duration
	// AllowExec turns the gated exec self-tool on (exec.go): a subagent whose
	// scope holds api.ExecRef may then run commands as exec children. Off, the
	// zero value, every exec call is refused as a tool result, and Start
	// refuses a root whose scope holds api.ExecRef.
	AllowExec bool
	// AskChargesDeadline counts a question's wait (subagent.ask) against
	// the asking subagent's deadline; by default the deadline moves by
	// the time waited (ask.go).
	AskChargesDeadline bool
	// InputHold, if positive, is how long a root's question waits before
	// its waiting tree is suspended: its processes end and give back their
	// slots, and the answer starts them again from their stored
	// conversations (suspend.go). Zero never suspends.
	InputHold time.Duration
	// Gates marks the tool calls that wait for a person's yes (gate.go);
	// the zero value gates nothing.
	Gates Gates
	// ExecOutput caps the bytes kept of an exec child's stdout, and separately
	// of its stderr; the rest is read and discarded, and a note marks the cut.
	// Default 64 KiB.
	ExecOutput int

	// SeedResource caps the bytes of one resource_ref seed slice the
	// supervisor reads for a starting child, and SeedResources those of all
	// the slices of one seed (resource.go). Defaults 64 KiB and 256 KiB.
	SeedResource, SeedResources int
	// SeedReadTimeout bounds the reads of one starting child's resource_ref
	// slices; default 10s.
	SeedReadTimeout time.Duration

	// LogLevel is the log level of a root subagent, its payload's
	// telemetry.log_level: the service's own level. A root's payload may ask
	// for a quieter level, never a more verbose one; children inherit their
	// parent's. The zero value is info.
	LogLevel slog.Level
	// LogContent decides whether prompts, model answers and tool arguments
	// and results may appear in logs and span attributes: in the supervisor's
	// own, and (as every payload's telemetry.log_content) in every child's.
	// Off, the zero value, they never do.
	LogContent bool
	// ChildStderr, if set, is every child's stderr: children write their log
	// lines to it themselves, past the supervisor. Nil, the default, pipes each
	// child's stderr to the supervisor, which forwards its lines through
	// Logger, tagged with the child's run_id and agent_path.
	ChildStderr *os.File
	// ProgressTimeout is Detector B: a child that sends no frame but pongs for
	// this long is stuck (stalled, cause no_progress). Default 120s.
	ProgressTimeout time.Duration
	// PingInterval and PingMiss are Detector C: a ctrl/ping every PingInterval,
	// and PingMiss in a row unanswered is stuck (stalled, cause pong_timeout).
	// Defaults 5s and 3.
	PingInterval time.Duration
	PingMiss     int

	// Restart is the schedule of the restart governor (Governor), for children
	// kept alive on purpose; never used for a one-shot root.
	Restart GovernorConfig

	// WarmPool is how many children are kept started ahead of time, past
	// ctrl/ready and waiting for their payload (pool.go). Unlike the other
	// fields, its zero value means no pool: the service's flag sets the
	// default.
	WarmPool int
	// PoolRehearse sends the warm pool's next child in line (the oldest
	// ready one, which the next spawn takes) ctrl/rehearse, once: only that
	// child rehearses its payload's path, and the others wait without its
	// caches (pool.go). Set it only when the children are agentd's own: any
	// other child reads its first frame as the spawn.
	PoolRehearse bool
}

func (c *Config) setDefaults() error {
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("supervisor: find own executable: %w", err)
		}
		c.Executable = exe
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = api.DefaultMaxFrame
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.SpawnReady, 2*time.Second)
	def(&c.DrainGrace, 5*time.Second)
	def(&c.KillGrace, 2*time.Second)
	def(&c.ReapGrace, time.Second)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	def(&c.ChildDeadline, 600*time.Second)
	def(&c.ExecDeadline, 120*time.Second)
	def(&c.SeedReadTimeout, 10*time.Second)
	if c.ExecOutput <= 0 {
		c.ExecOutput = 64 << 10
	}
	if c.SeedResource <= 0 {
		c.SeedResource = 64 << 10
	}
	if c.SeedResources <= 0 {
		c.SeedResources = 256 << 10
	}
	def(&c.ProgressTimeout, 120*time.Second)
	def(&c.PingInterval, 5*time.Second)
	if c.PingMiss <= 0 {
		c.PingMiss = 3
	}
	if c.Restart.Logger == nil {
		c.Restart.Logger = c.Logger
	}
	return nil
}

// Observer hears about the tree as it changes. Calls for one node arrive in
// order (started, progress..., finished) from that node's goroutine; calls for
// different nodes may be concurrent. Implementations must not block.
type Observer interface {
	NodeStarted(n NodeInfo)
	NodeProgress(n NodeInfo)
	NodeFinished(n NodeInfo, r api.SubagentResult)
}

// TextObserver is an optional interface of an Observer: NodeText hears the
// model's text of a node's step as the child streams it (api.EventText),
// between the node's NodeProgress calls and before its NodeFinished, in the
// order the child sent it. The text is shown, never accounted: the node's
// result is its answer. Like every Observer call it must not block.
type TextObserver interface {
	NodeText(n NodeInfo, step int, text string)
}

// StepObserver is an optional interface of an Observer: NodeStep hears each
// model call a node's child reports (api.StepModel, with its tokens,
// duration and endpoint) and each tool call the supervisor serves for it
// (api.StepTool, with its arguments and result, each cut to
// api.MaxStepText), between its NodeStarted and NodeFinished. Like every
// Observer call it must not block.
type StepObserver interface {
	NodeStep(n NodeInfo, s api.Step)
}

// NodeInfo is a snapshot of one subagent.
type NodeInfo struct {
	Handle       string // the A2A task id of this subagent
	RootHandle   string // the handle of the tree's root
	ParentHandle string // empty for a root
	RunID        string
	AgentID      string
	AgentPath    string
	Depth        int
	PID          int
	Objective    string
	// Kind is KindSubagent, or KindExec for an exec child (a command run by
	// the exec self-tool, with no control channel).
	Kind   string
	State  string // StateStarting, StateRunning, StateStopping or StateSuspended
	Health Health // the detectors' classification while running; empty before
	// LastProgress is when the child last sent a frame other than a pong
	// (Detector B's clock), and MissedPings how many pings in a row it has
	// left unanswered (Detector C); both zero while Health is empty.
	LastProgress time.Time
	MissedPings  int
	Provider     string // "local", or the peer provider a delegation went to
	Usage        api.Usage
	MaxTokens    int64 // the subagent's token grant (its payload's limits.max_tokens)
	Deadline     time.Time
	// Disposition is how the parent waits for it (sync, async, detach); empty
	// for a root.
	Disposition api.Disposition
	// Traceparent is the W3C trace context of the subagent's payload
	// telemetry (empty when the run has none), for tool servers to pass on.
	Traceparent string
	// LogContent is the subagent's telemetry.log_content: whether a tool
	// server may log or trace its arguments and results.
	LogContent bool
}

// Node kinds, as NodeInfo reports them.
const (
	KindSubagent = "subagent" // a re-exec'd subagent, or a remote delegation
	KindExec     = "exec"     // a command run by the exec self-tool
)

// Node states, as NodeInfo reports them.
const (
	StateStarting = "starting" // forked, payload not yet delivered
	StateRunning  = "running"  // working on its payload
	StateStopping = "stopping" // on the kill ladder
	// StateSuspended: its process ended while it waits for an answer, and
	// the answer starts it again (suspend.go); it has no PID.
	StateSuspended = "suspended"
)

// ToolServer executes scoped tools for children. Implementations are safe for
// concurrent use. Errors are results with IsError set, never Go errors: the
// model sees them.
type ToolServer interface {
	Call(ctx context.Context, caller NodeInfo, tool string, args json.RawMessage) api.ToolResult
}

// Delegator starts a delegation on a non-local provider for a nested spawn. The
// supervisor has already minted the identity and clamped the limits in payload;
// the delegation's deadline is enforced by the supervisor too.
type Delegator interface {
	Delegate(ctx context.Context, provider, handle string, payload api.SpawnPayload) (Remote, error)
}

// Remote is one running non-local delegation. Result never fails: a failed
// remote child is a result with a status.
type Remote interface {
	Done() <-chan struct{}
	Result() api.SubagentResult
	Cancel(reason string)
}

// RemoteWaiter is a Remote that can say which of its peer's questions it
// waits on the answer of, and stop following its peer's task without
// cancelling it: a remote child of a waiting tree is recorded and suspended
// so (suspend.go).
type RemoteWaiter interface {
	WaitingOn() (api.WaitingRemote, bool)
	Detach()
}

// RemoteResumer is a Delegator that resumes a remote child whose peer's task
// waits on the question w: it sends answer to that task and follows it on,
// sending no new delegation.
type RemoteResumer interface {
	ResumeRemote(ctx context.Context, provider, handle string, payload api.SpawnPayload, w api.WaitingRemote, answer string) (Remote, error)
}

// selfTool serves one self-tool for the calling node.
type selfTool func(ctx context.Context, caller *node, args json.RawMessage) api.ToolResult

// ErrDraining refuses new work while the supervisor drains.
var ErrDraining = errors.New("supervisor: draining, no new work accepted")

// ErrUnclean reports a drain in which some process would not reap.
var ErrUnclean = errors.New("supervisor: unclean drain, a process would not reap")

// Supervisor runs subagent trees. It is safe for concurrent use. Create it with
// New; the zero value is not usable.
type Supervisor struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex       // guards nodes, draining
	nodes    map[string]*node // live nodes by handle
	draining bool

	steer steerState // steering messages not yet taken, remote delegations (steer.go)

	wg       sync.WaitGroup // one per node goroutine
	unreaped atomic.Int64
	stats    counters
	gov      *Governor

	capsMu sync.Mutex // guards caps
	caps   Caps

	selfTools map[string]selfTool // fixed after New

	blobs *blob.Store
	pause pauseGate // a2a.Pause / a2a.Resume; see pause.go
	hb    heartbeat // see observe.go

	execEnv []string  // an exec child's environment: Config.Env without any AGENT_ variable
	pool    *pool     // nil without a warm pool
	intel   intelView // the intelligence endpoints as children report them; see intelligence.go

	baseEnv []string               // Config.Env plus the subagent marker, our pid and the frame limit
	env     atomic.Pointer[envSet] // every child's environment: baseEnv plus the KeyEnv in force; see keyenv.go
	keyMu   sync.Mutex             // serializes SetKeyEnv
}

// New returns a supervisor. It starts the process-wide reaper.
func New(cfg Config) (*Supervisor, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	caps := cfg.Caps.withDefaults()
	if err := caps.Validate(); err != nil {
		return nil, err
	}
	theReaper.start(cfg.Logger)
	if cfg.WarmPool < 0 {
		return nil, fmt.Errorf("supervisor: warm pool size %d is negative", cfg.WarmPool)
	}
	blobs, err := blob.New(cfg.Blobs, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{cfg: cfg, log: cfg.Logger, nodes: make(map[string]*node), caps: caps, gov: NewGovernor(cfg.Restart), blobs: blobs}
	s.selfTools = s.selfToolTable()
	s.baseEnv = append(childGC(cfg.Env, cfg.ChildMemoryLimit, cfg.ChildGOGC, cfg.ChildGOMAXPROCS, cfg.ChildGODEBUG),
		api.EnvSubagent+"=1",
		api.EnvSupervisorPID+"="+strconv.Itoa(os.Getpid()),
		api.EnvMaxFrame+"="+strconv.Itoa(cfg.MaxFrame), // both ends refuse the same frames
	)
	s.env.Store(s.newEnvSet(cfg.KeyEnv))
	s.execEnv = execEnv(cfg.Env)
	if cfg.WarmPool > 0 {
		s.pool = newPool(s, cfg.WarmPool)
	}
	return s, nil
}

// childGC is env with the Go runtime's settings of an agentd child:
// GOMEMLIMIT, GOGC and GOMAXPROCS replaced by limit (bytes), gogc and procs
// where positive, and godebug, where set, put before env's GODEBUG.
func childGC(env []string, limit int64, gogc, procs int, godebug string) []string {
	out := make([]string, 0, len(env)+6)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if (k == "GOMEMLIMIT" && limit > 0) || (k == "GOGC" && gogc > 0) || (k == "GOMAXPROCS" && procs > 0) {
			continue
		}
		if k == "GODEBUG" && godebug != "" {
			if v != "" {
				godebug += "," + v
			}
			continue
		}
		out = append(out, kv)
	}
	if godebug != "" {
		out = append(out, "GODEBUG="+godebug)
	}
	if limit > 0 {
		out = append(out, "GOMEMLIMIT="+strconv.FormatInt(limit, 10))
	}
	if gogc > 0 {
		out = append(out, "GOGC="+strconv.Itoa(gogc))
	}
	if procs > 0 {
		out = append(out, "GOMAXPROCS="+strconv.Itoa(procs))
	}
	return out
}

// StartRequest asks for a new tree: a root subagent with this payload. The
// supervisor mints the identity fields (agent_id, agent_path, depth) and the
// run_id if the payload has none.
type StartRequest struct {
	Handle  string // the root's handle (its A2A task id); generated if empty
	Payload api.SpawnPayload
	// MeshDepth and MeshMaxDepth place the tree in the A2A mesh: the depth
	// its root sits at (0 for a request from a plain client, D for one a
	// peer delegated at depth D) and the deepest depth any subagent serving
	// the request may reach (0: no mesh cap). The tree then nests at most
	// MeshMaxDepth-MeshDepth levels below its root (none when that is not
	// positive), and never past the max_depth cap.
	MeshDepth, MeshMaxDepth int
	// Workflow, if set, makes the root a workflow root: no process, the
	// supervisor runs these steps as its children through the spawn
	// chokepoint (workflow.go), against the payload's grant. Its steps must
	// have been checked (package workflow).
	Workflow []WorkflowStep
	// Caller is who asked for the tree (the task's owner, "" when
	// anonymous): the blobs the tree stores count against its quota.
	Caller string
	// Questions makes the tree's root questions arrive on Run.Questions,
	// which the starter must then read; without it a root's subagent.ask
	// is refused.
	Questions bool
	// Resume, if set, starts the tree from a stored waiting tree (Run.Waiting,
	// suspend.go) in place of Payload: each of its subagents under its
	// handle and agent path, from its conversation, with Answer as the
	// result of its pending subagent.ask call. Handle must be the root's.
	Resume *api.WaitingTree
	Answer string
	// ObjectiveFrom, if set, reads Payload's objective back from where its
	// starter keeps it (the task store): once the root's child has its
	// payload, the root keeps only the head of an objective over 16 KiB
	// (objective.go), and reads it back where it needs it whole.
	ObjectiveFrom func(context.Context) (string, error)
}

// Run is a handle on a started subagent. It is safe for concurrent use.
type Run struct{ n *node }

// Handle returns the subagent's handle.
func (r *Run) Handle() string { return r.n.handle }

// Done is closed when the subagent has ended and its process is reaped.
func (r *Run) Done() <-chan struct{} { return r.n.done }

// Result returns the final result; it blocks until Done.
func (r *Run) Result() api.SubagentResult {
	<-r.n.done
	return r.n.final
}

// Settled is closed once the run's result is final: when the root's result
// frame has been read, while its process may still be exiting, or at Done,
// whichever comes first. The result never changes after it; Done still
// says when the process is reaped.
func (r *Run) Settled() <-chan struct{} { return r.n.settled }

// SettledResult returns the final result; it blocks until Settled.
func (r *Run) SettledResult() api.SubagentResult {
	<-r.n.settled
	return r.n.final
}

// Info returns a snapshot of the subagent.
func (r *Run) Info() NodeInfo { return r.n.info() }

// Start launches a new tree and returns at once; a failure to start becomes a
// crashed result, never an error, except while draining.
func (s *Supervisor) Start(ctx context.Context, req StartRequest) (*Run, error) {
	p := req.Payload
	if w := req.Resume; w != nil {
		if err := w.Validate(); err != nil {
			return nil, fmt.Errorf("supervisor: resume: %w", err)
		}
		if req.Handle != w.Nodes[0].Handle {
			return nil, fmt.Errorf("supervisor: resume: the handle %q is not the stored root's %q", req.Handle, w.Nodes[0].Handle)
		}
		p = s.resumedPayload(w, &w.Nodes[0], req.Answer)
	}
	if p.Telemetry.RunID == "" {
		p.Telemetry.RunID = newID()
	}
	p.AgentID, p.AgentPath, p.Depth = "0", "0", 0
	if p.Scope.Holds(api.ExecRef) && !s.cfg.AllowExec {
		return nil, errors.New("supervisor: the root scope holds " + api.ExecRef.String() + " but exec is not allowed (Config.AllowExec)")
	}
	p.Seed = p.Seed.WithoutResolved() // the supervisor reads references itself
	p.Telemetry.LogLevel = s.rootLevel(p.Telemetry.LogLevel)
	p.Telemetry.LogContent = s.cfg.LogContent // the operator's decision, whoever asked
	p.Scope.Tags = ScopeTags(p.Scope.Allow, s.cfg.ToolTags)
	p.Tools = s.toolSpecs(p.Scope.Allow)
	s.capDeadline(&p)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	if err := s.fitsFrame(&p); err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	handle := req.Handle
	if handle == "" {
		handle = newID()
	}
	span := startSpawnSpan(ctx, &p, localProvider)
	n := newNode(handle, nil, p)
	n.span = span
	if req.Resume == nil {
		n.objectiveFrom = req.ObjectiveFrom
	}
	t := newTree(n)
	if len(req.Workflow) > 0 {
		n.nest.workflow, n.nest.provider = req.Workflow, WorkflowProvider
	}
	t.caller = req.Caller
	if req.Questions {
		t.questions = make(chan *Question)
	}
	if req.MeshMaxDepth > 0 {
		t.depthCap = max(req.MeshMaxDepth-req.MeshDepth, 0)
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		span.End()
		return nil, ErrDraining
	}
	if _, dup := s.nodes[handle]; dup {
		s.mu.Unlock()
		span.End()
		return nil, fmt.Errorf("supervisor: handle %q is already running", handle)
	}
	s.nodes[handle] = n
	s.wg.Add(1)
	s.mu.Unlock()
	s.stats.spawn(localProvider)
	var resumed []*node
	var rerr error
	if req.Resume != nil {
		resumed, rerr = s.attachResumed(n, req.Resume, req.Answer)
	}
	go s.run(n)
	for _, c := range resumed {
		go s.run(c)
	}
	if rerr != nil {
		s.killSubtree(n, verdict{status: api.StatusCrashed, detail: rerr.Error()}, "resume failed")
	}
	return &Run{n: n}, nil
}

// fitsFrame refuses a payload whose spawn frame would be over the frame
// limit, with an error wrapping api.ErrFrameTooLarge, before any child is
// taken for it: a child handed a frame it cannot read is lost, and a warm
// child is a paid-for start.
func (s *Supervisor) fitsFrame(p *api.SpawnPayload) error {
	n, err := api.FrameSize(api.MethodSpawn, 0, p)
	if err != nil {
		return fmt.Errorf("encode the spawn payload: %w", err)
	}
	if n > s.cfg.MaxFrame {
		return fmt.Errorf("%w: the spawn payload is %d bytes, limit %d", api.ErrFrameTooLarge, n, s.cfg.MaxFrame)
	}
	return nil
}

// Lookup returns the live subagent with this handle.
func (s *Supervisor) Lookup(handle string) (*Run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[handle]
	if !ok {
		return nil, false
	}
	return &Run{n: n}, true
}

// Cancel runs the kill ladder on the subtree rooted at handle, with status
// cancelled, and returns at once. It reports whether a live subagent had that
// handle.
func (s *Supervisor) Cancel(handle, reason string) bool {
	s.mu.Lock()
	n, ok := s.nodes[handle]
	s.mu.Unlock()
	if !ok {
		return false
	}
	s.killSubtree(n, verdict{status: api.StatusCancelled, detail: "cancelled: " + reason}, reason)
	return true
}

// Live returns a snapshot of every live subagent.
func (s *Supervisor) Live() []NodeInfo {
	nodes := s.liveNodes()
	out := make([]NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = n.info()
	}
	return out
}

// Draining reports whether Shutdown has begun.
func (s *Supervisor) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Shutdown drains: it refuses new work, SIGKILLs the warm pool's idle
// children (they hold no work), runs the kill ladder over every live tree, and
// waits until every child is reaped or ctx ends. It returns ErrUnclean if a
// process would not reap (or ctx ended first), nil after a clean drain.
// Calling it again waits again.
func (s *Supervisor) Shutdown(ctx context.Context) error {
	s.pool.close()
	s.mu.Lock()
	s.draining = true
	// Every tree with a live node, by its root: a detached subagent may outlive
	// its ancestors, and killSubtree walks through ended nodes to reach it.
	var roots []*node
	seen := make(map[*node]bool)
	for _, n := range s.nodes {
		if r := n.nest.tree.root; !seen[r] {
			seen[r] = true
			roots = append(roots, r)
		}
	}
	s.mu.Unlock()
	for _, n := range roots {
		s.killSubtree(n, verdict{status: api.StatusCancelled, detail: "cancelled: supervisor draining"}, "drain")
	}
	all := make(chan struct{})
	go func() { s.wg.Wait(); _ = s.pool.wait(context.Background()); close(all) }()
	select {
	case <-all:
	case <-ctx.Done():
		s.log.Error("drain timed out", "live", len(s.Live()))
		return ErrUnclean
	}
	if n := s.unreaped.Load(); n > 0 {
		return fmt.Errorf("%w: %d unreaped", ErrUnclean, n)
	}
	return nil
}

// KillAll sends SIGKILL to every child's process group at once: the second
// signal to a draining supervisor.
func (s *Supervisor) KillAll() {
	s.pool.close()
	s.mu.Lock()
	s.draining = true
	nodes := make([]*node, 0, len(s.nodes))
	for _, n := range s.nodes {
		nodes = append(nodes, n)
	}
	s.mu.Unlock()
	var procs []*proc
	for _, n := range nodes {
		// A process already SIGKILLed (by its ladder) is not counted again.
		if p := n.getProc(); p != nil && !p.exited() && !p.killed.Swap(true) {
			s.stats.kills.Add(1)
			procs = append(procs, p)
		}
	}
	// Signal first, log after: the groups go down together.
	sent := 0
	for _, p := range procs {
		if p.signal(sigKill) {
			sent++
		}
	}
	s.log.Warn("kill ladder: SIGKILL to every process group", "groups", sent, "reason", "forced")
}

// StoreBlob stores content for a task that has ended (owner is its id,
// caller who created it), to be read at api.BlobURI of the returned id: the
// task engine keeps the large parts of finished tasks here. The blob's
// retention starts now; it is bounded and evicted with the rest of the blob
// store (blob.ErrTooLarge, blob.ErrStoreFull).
func (s *Supervisor) StoreBlob(owner, caller, mediaType string, content []byte) (blob.Blob, error) {
	return s.blobs.Put(owner, caller, "", mediaType, content, true)
}

// BlobUsage returns the blobs and bytes the blob store holds.
func (s *Supervisor) BlobUsage() (blobs int, bytes int64) { return s.blobs.Usage() }

// Blob returns a stored distillate by id, unless it is unknown or its
// retention window has passed.
func (s *Supervisor) Blob(id string) (blob.Blob, bool) { return s.blobs.Get(id) }

// ReadBlob returns a stored distillate's content, media type and owner (the
// handle of the root of the tree that stored it); it is Blob for consumers
// that need only those (server.BlobSource).
func (s *Supervisor) ReadBlob(id string) ([]byte, string, string, bool) {
	b, ok := s.blobs.Get(id)
	return b.Content, b.MediaType, b.Owner, ok
}

// Unreaped returns how many processes never reaped inside their kill budget.
func (s *Supervisor) Unreaped() int64 { return s.unreaped.Load() }

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// rootLevel is the log level of a root whose payload asks for asked: the
// service's level, or a quieter one the payload names.
func (s *Supervisor) rootLevel(asked string) string {
	lvl := s.cfg.LogLevel
	if l, ok := api.ParseLogLevel(asked); ok && asked != "" && l > lvl {
		lvl = l
	}
	return strings.ToLower(lvl.String())
}
