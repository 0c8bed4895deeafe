package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/telemetry"
)

// ExitParentMismatch is the exit code of a child whose parent is not the
// supervisor that spawned it: the supervisor died between fork and prctl.
const ExitParentMismatch = 137

// Main runs subagent mode and returns the process exit code. cmd/agentd calls it
// first thing when AGENT_SUBAGENT is set. It arms PR_SET_PDEATHSIG(SIGKILL),
// checks that its parent is still the supervisor named in AGENT_SUPERVISOR_PID,
// announces ctrl/ready, reads the spawn frame, runs the loop, writes the result
// frame and returns 0. The payload never travels on argv.
func Main() int {
	// PDEATHSIG is cleared across execve, so the child arms it itself; then it
	// closes the fork/prctl race by checking that its parent is still alive.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "agentd subagent: prctl(PR_SET_PDEATHSIG):", err)
		return 1
	}
	if want, err := strconv.Atoi(os.Getenv(api.EnvSupervisorPID)); err != nil || unix.Getppid() != want {
		return ExitParentMismatch
	}
	return Serve(context.Background(), controlIn(), os.Stdout, os.Stderr, os.Getenv(api.EnvIntelligenceKey))
}

// controlIn returns control-in (fd 0) for reading through the runtime's
// netpoller: the pipe is made non-blocking and wrapped anew (os.Stdin was
// wrapped at init, blocking), so the goroutine that waits on the
// supervisor's next frame parks without a thread. Read blocking, it held
// a thread in read(2) all the child's life: a waiting child had 4 to 5
// threads, each a kernel stack the cgroup charges and a Go stack of its
// own. EOF and errors read as before: the child's run ends when the
// supervisor's end closes. Where the descriptor cannot be made
// non-blocking, it is os.Stdin as it was.
func controlIn() *os.File {
	if err := unix.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "control-in")
}

// Serve runs one subagent over the given control pipes: ctrl/ready, the spawn
// frame, the loop, the result frame. It returns the exit code. The run is a
// span under the payload's trace context, exported as the OTEL_* environment
// says (telemetry.Setup) and flushed before the result frame. Serve may
// return while its reader of in is still blocked in a read: that goroutine
// ends when in reaches EOF or fails, so a caller that outlives Serve closes
// in's write end, as the supervisor closes control-in once it reaped the child
// (a subagent process simply exits).
func Serve(ctx context.Context, in io.Reader, out io.Writer, errw io.Writer, key string) int {
	// The level is info until the payload names the child's (its
	// telemetry.log_level).
	level := new(slog.LevelVar)
	log := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(errw, &slog.HandlerOptions{Level: level}))).With("pid", os.Getpid())
	c := newControl(in, out, log)
	if err := c.w.Send(api.MethodReady, 0, api.Ready{PID: os.Getpid()}); err != nil {
		log.Error("send ctrl/ready", "err", err)
		return 1
	}
	// The tracer provider depends on the environment only: it is built
	// before the payload comes, off the path of a child waiting in the warm
	// pool. The supervisor validated the OTEL_* environment it passed on; a
	// failure here costs the traces, not the run.
	tp, tpErr := telemetry.Setup(ctx, telemetry.Options{Log: log, Attributes: []attribute.KeyValue{attribute.String("agentd.role", "subagent")}})
	f, err := c.awaitSpawn(log)
	heapAtSpawn.Store(heapObjects())
	p, err := c.decodeSpawn(f, err)
	if err != nil {
		log.Error("no spawn payload", "err", err)
		return 1
	}
	if l, ok := p.Telemetry.Level(); ok {
		level.Set(l)
	}
	log = log.With("run_id", p.Telemetry.RunID, "agent_path", p.AgentPath)
	if tpErr != nil {
		log.Warn("tracing off", "err", tpErr)
	}
	ctx, span := startRunSpan(ctx, p)
	log = telemetry.WithSpan(log, span.SpanContext())
	c.log = log
	deadline := time.Now().Add(p.Limits.Deadline.D())
	finish := func(res api.SubagentResult) int {
		endRunSpan(span, res, p.Telemetry.LogContent)
		flushSpans(tp, deadline, log)
		return c.finish(res)
	}
	if err := p.Validate(); err != nil {
		return finish(api.SubagentResult{Status: api.StatusCrashed, Detail: "invalid spawn payload: " + err.Error()})
	}
	model, err := intelligence.New(p.Intelligence, key)
	if err != nil {
		return finish(api.SubagentResult{Status: api.StatusCrashed, Detail: err.Error()})
	}
	if m, ok := model.(interface{ SetLogger(*slog.Logger, bool) }); ok {
		m.SetLogger(log, p.Telemetry.LogContent)
	}
	if m, ok := model.(reporterSetter); ok {
		m.SetReporter(c.reportIntelligence)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go c.serve(cancel)
	ctx, clock, stop := withPausableDeadline(ctx, deadline)
	defer stop()
	c.clock = clock // a question's wait does not count (subagent.ask)
	logInfo(log, "subagent started", "depth", p.Depth, "deadline", p.Limits.Deadline.String())
	loop := &Loop{Payload: p, Model: model, Tools: offeredTools(p), Caller: c, Report: c, Blobs: c, Log: log, Hold: c.hold.wait, Steered: c.steers.take,
		Stream: newTextStream(c.text), Idle: releaseIdle, IdleAfter: idleAfter}
	res := loop.Run(ctx)
	logInfo(log, "subagent finished", "status", res.Status, "steps", res.Usage.Steps)
	return finish(res)
}

// awaitSpawn returns the first downward frame other than ctrl/rehearse.
// The warm pool sends its next child in line ctrl/rehearse (and no other
// child: supervisor.Config.PoolRehearse): that child then builds the caches
// and pages in the code its payload will need (rehearse), once, and goes on
// waiting. It reads and rehearses on the goroutine that waits, whose stack
// the child's start-up already grew (a goroutine of its own grew a second
// one, 32 KiB that stayed for the child's life; figure 9). A child spawned
// cold, or taken from the pool before its turn came, is sent its payload
// first and never rehearses: its payload's run builds what it needs. A
// payload that comes during the rehearsal waits in the pipe for its end
// (about a millisecond). Any other first frame is returned as before, for
// decodeSpawn to refuse.
func (c *control) awaitSpawn(log *slog.Logger) (*api.Frame, error) {
	rehearsed := false
	for {
		f, err := c.r.Read()
		if err != nil || f.Method != api.MethodRehearse {
			return f, err
		}
		if rehearsed {
			continue // the pool sends it once; a second one is nothing to do
		}
		rehearsed = true
		logMemClasses(log, "ready")
		rehearse(telemetry.NewLogHandler(slog.NewJSONHandler(io.Discard, nil)))
		logMemClasses(log, "rehearsed")
	}
}

// logInfo logs msg and args at Info as log.Info does, but with no caller's
// program counter in the record: slog.Logger's methods unwind the stack for
// one (runtime.Callers), which reads the binary's function table (pclntab)
// for each frame walked, and a child's handler records no source. The two
// lines of every run ("subagent started", "subagent finished") were what
// made a child read agentd's own pages of that table: the kernel maps 64
// KiB around each fault, and the warm pool's next child, which logged its
// rehearsal's line, held three such windows that no other process mapped,
// 192 KiB of its private memory (docs/performance.md, figure 9); each child
// that ran faulted them in again.
func logInfo(log *slog.Logger, msg string, args ...any) {
	ctx := context.Background() // what log.Info passes its handler
	h := log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, msg, 0)
	r.Add(args...)
	_ = h.Handle(ctx, r)
}

// idleAfter is how long a model call runs before the child returns its
// free memory to the system (Loop.Idle): a model answers in seconds, so a
// call still running after this is a wait, and the forced collection it
// costs (about a millisecond on a child's heap) is small beside it.
const idleAfter = 100 * time.Millisecond

// idleReclaim is what a waiting child must be able to give back before
// releaseIdle collects: below it, a forced collection's own state costs about
// as many pages as it frees (a builtin:wait child, with no conversation,
// measured 2.8 to 3.0 MiB PSS with an unconditional one; figure 5).
const idleReclaim = 512 << 10

// firstReclaim is idleReclaim for a child that has not collected yet. A
// child's first collection costs memory that stays: the runtime's sets of
// spans by size class take blocks of their own once the sweep moves spans
// between them, and the mark bits their arenas (figure 9: the runtime's
// metadata mapping went from 88 to over 1000 KiB resident in a child in a
// model call). Figure 9's child, its 64 KiB conversation and its requests
// written without a copy (jsonBody), allocates about 600 KiB after
// ctrl/ready: collecting it grew the child (20 children: 3261 KiB private
// each with one collection, 3588 with two, 3132 with none), where a tree's
// root, which holds more, gains from it (18 in trees: 3355 KiB a child at
// 1 MiB, 3430 at 2 MiB, the root 5.0 against 6.4 MiB).
const firstReclaim = 1 << 20

// releaseIdle is Loop.Idle in a subagent: when what a collection could give
// back (reclaimable) comes to idleReclaim (firstReclaim before the child's
// first collection), it collects and returns the free pages (release).
func releaseIdle() {
	defer dumpMemory() // EnvMemDump's diagnostic; off by default
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return
		}
	}
	if worthCollecting(s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64(), heapAtSpawn.Load()) {
		release()
	}
}

// worthCollecting says whether a waiting child's collection gives back
// enough: reclaimable comes to idleReclaim, or to firstReclaim before any
// collection (cycles 0).
func worthCollecting(free, objects, live, cycles, atSpawn uint64) bool {
	need := uint64(idleReclaim)
	if cycles == 0 {
		need = firstReclaim
	}
	return reclaimable(free, objects, live, cycles, atSpawn) >= need
}

// heapAtSpawn is the heap's object bytes when the spawn frame came, before
// its decoding: what the child's package init left (nearly all of it live
// for the child's life) and, in a warm child, its rehearsal's caches. It is
// read then, not at ctrl/ready: runtime/metrics builds its table of every
// metric on the first read (about 20 KiB, kept), which a child waiting in
// the pool would carry for nothing (figure 9).
var heapAtSpawn atomic.Uint64

// heapObjects is the heap's object bytes now.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// reclaimable is what a collection could give back: the heap's free pages
// not yet returned to the system, plus the objects the last collection did
// not find live (the payload's decoding, the request's encoding). Before any
// collection (cycles 0) the garbage is unknown: what was allocated since
// the spawn frame came (objects over atSpawn, heapAtSpawn) counts instead. A child in a model call
// with figure 9's 64 KiB conversation had not collected (its heap under the
// runtime's 4 MB minimum goal), and with only the free pages counted
// (none) it kept about 2 MiB of objects, most of them garbage, all the wait.
func reclaimable(free, objects, live, cycles, atSpawn uint64) uint64 {
	switch {
	case cycles > 0 && objects > live:
		return free + objects - live
	case cycles == 0 && objects > atSpawn:
		return free + objects - atSpawn
	}
	return free
}

// release collects once and returns the free pages to the system
// (debug.FreeOSMemory). A second collection (there was one before it, to
// free what a sync.Pool keeps as its victim after one: encoding/json's
// encoder buffer, grown to the whole request) cost more than it freed once
// the requests were written without that buffer (jsonBody): in figure 9 a
// child in a model call was 3588 KiB private with two, 3261 with one. What a
// pool keeps (net/http's 32 KiB copy buffer) is freed by the child's next
// collection.
func release() {
	debug.FreeOSMemory()
}

// finish writes the result frame; it is the child's last word.
func (c *control) finish(res api.SubagentResult) int {
	if err := c.w.Send(api.MethodResult, 0, res); err != nil {
		c.log.Error("send result", "err", err)
		return 1
	}
	return 0
}

// CallTool implements ToolCaller over the control channel.
func (c *control) CallTool(ctx context.Context, name string, args json.RawMessage) (api.ToolResult, error) {
	r, _, err := c.call(ctx, name, args, nil)
	return r, err
}

// CallToolWith implements ConversationCaller: a subagent.ask call carries
// the conversation.
func (c *control) CallToolWith(ctx context.Context, name string, args json.RawMessage, conv *api.Conversation) (api.ToolResult, error) {
	r, _, err := c.call(ctx, name, args, conv)
	return r, err
}

// callText implements textCaller: the result and, when the control
// channel decoded it without a copy, its text as the model is shown it.
func (c *control) callText(ctx context.Context, name string, args json.RawMessage, conv *api.Conversation) (api.ToolResult, string, error) {
	return c.call(ctx, name, args, conv)
}

// Event implements Reporter over the control channel.
func (c *control) Event(step int, kind string, delta api.Usage) { c.event(step, kind, delta) }

// ModelEvent implements ModelReporter: a model event with its call's
// duration and endpoint.
func (c *control) ModelEvent(step int, delta api.Usage, took time.Duration, endpoint string) {
	ev := api.LoopEvent{Step: step, Kind: api.EventModel, UsageDelta: delta, DurationMS: took.Milliseconds(), Endpoint: endpoint}
	if err := c.w.Send(api.MethodEvent, 0, ev); err != nil {
		c.log.Warn("loop/event failed", "err", err)
	}
}

// offeredTools is what the loop offers its model: the self-tools every
// subagent has (subagent.spawn, status, await, cancel, resource.read and
// resource.wait), then the granted tools the supervisor described in the
// payload (the exec self-tool among them when the scope holds it). The
// description of resource.read names the MCP servers whose resources the
// scope grants.
func offeredTools(p *api.SpawnPayload) []intelligence.ToolSpec {
	var servers []string
	for _, r := range p.Scope.Allow {
		if r.Tool == api.ResourcesTool {
			servers = append(servers, r.Server)
		}
	}
	self := api.SelfToolSpecs()
	tools := make([]api.ToolSpec, 0, len(self)+len(p.Tools))
	for _, t := range self {
		if p.Agent.AllowsSelfTool(t.Name) { // a declared agent type may offer fewer
			tools = append(tools, t)
		}
	}
	tools = append(tools, p.Tools...)
	out := make([]intelligence.ToolSpec, 0, len(tools))
	for _, t := range tools {
		if t.Name == api.ToolResourceRead {
			if len(servers) > 0 {
				t.Description += " MCP servers whose resources you may read: " + strings.Join(servers, ", ") + "."
			} else {
				t.Description += " Your scope grants the resources of no MCP server."
			}
		}
		out = append(out, intelligence.ToolSpec{Name: intelligence.ModelToolName(t.Name), Wire: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return out
}
