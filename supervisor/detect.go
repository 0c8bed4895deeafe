package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/api"
)

// A live pid is not a live agent. Three detectors watch every child once it has
// its payload (docs/ARCHITECTURE.md §6.2):
//
//   - A, the hard deadline: the payload's deadline, capped at ChildDeadline
//     when the node is created (capDeadline); on expiry the verdict is deadline
//     and the kill ladder runs on the subtree. It lives in the supervise loop's
//     deadline timer (and in the pause hold, for a spawn not yet started).
//   - B, the no-progress watchdog: every upward frame except ctrl/pong stamps
//     the child's last progress; no progress for ProgressTimeout is stuck
//     (status stalled, cause no_progress). Paused time (a2a.Pause) does not
//     count. The clock also stops while the supervisor
//     itself serves one of the child's tool calls (a sync subagent.spawn may
//     take as long as the grandchild's deadline): waiting on the supervisor is
//     not the child's stall.
//   - C, ping/pong: a ctrl/ping every PingInterval; the child answers from its
//     control reader, which never waits on its loop, so it answers during a long
//     model or tool call. PingMiss pings in a row left unanswered is stuck
//     (status stalled, cause pong_timeout).
//
// The classifier combines the axes. EOF on control-out alone never declares
// death: an Exiting or Dead child is confirmed by the reap before the tree
// changes, and a BusyHealthy child (no events, pongs flowing) is left alone.

// Health is the classifier's view of a live child.
type Health string

// The classifier's states (docs/ARCHITECTURE.md §6.3).
const (
	Healthy     Health = "healthy"      // events flowing (a missed pong or two is transient)
	BusyHealthy Health = "busy_healthy" // no recent events but pongs flowing: a long call, left alone
	Stuck       Health = "stuck"        // pongs stopped, or no progress for the progress timeout
	Exiting     Health = "exiting"      // sent its result, or EOF on control-out while pongs flowed: the reap confirms
	Dead        Health = "dead"         // EOF on control-out after pongs stopped: the reap confirms
)

// observation is what the detectors know about a child at one moment.
type observation struct {
	result bool          // the result frame arrived: the child's last word
	eof    bool          // control-out reached EOF
	quiet  time.Duration // since the last progress frame
	missed int           // pings in a row left unanswered
	busy   bool          // the supervisor is serving one of the child's tool calls
}

// thresholds are the detectors' timings.
type thresholds struct {
	interval time.Duration // PingInterval: events within it count as flowing
	progress time.Duration // ProgressTimeout
	miss     int           // PingMiss
}

// classify is the EOF x pong table. For Stuck it also names the cause.
func classify(o observation, t thresholds) (Health, string) {
	switch {
	case o.result, o.eof && o.missed == 0:
		return Exiting, ""
	case o.eof:
		return Dead, ""
	case o.missed >= t.miss:
		return Stuck, api.CausePongTimeout
	case !o.busy && o.quiet >= t.progress:
		return Stuck, api.CauseNoProgress
	case o.quiet < t.interval:
		return Healthy, ""
	default:
		return BusyHealthy, ""
	}
}

// monoBase is the origin of liveness stamps (monotonic nanoseconds).
var monoBase = time.Now()

// liveness is the detectors' shared view of one child: the supervise loop stamps
// frames, the watcher pings and judges, snapshots classify. Safe for concurrent
// use; the zero value is inert until the watcher arms it.
type liveness struct {
	lastFrame atomic.Int64 // ns since epoch of the last progress frame
	sent      atomic.Uint64
	acked     atomic.Uint64
	missed    atomic.Int32
	tools     atomic.Int32 // supervisor-served tool calls in flight
	eof       atomic.Bool
	sending   atomic.Bool // a ping write is in flight
	resulted  atomic.Bool
	// onResult is called at the result frame, once; set by watch before
	// any frame is seen (the supervise loop calls both).
	onResult func()

	// Set by the watcher when it starts; zero until then.
	interval, progress atomic.Int64
	miss               atomic.Int32
}

func (l *liveness) now() int64 { return int64(time.Since(monoBase)) }

// saw stamps an upward frame. A pong only acknowledges pings; every other frame
// is progress. A pong for a ping never sent acknowledges nothing.
func (l *liveness) saw(f *api.Frame) bool {
	if f.Method != api.MethodPong {
		l.lastFrame.Store(l.now())
		if f.Method == api.MethodResult && l.resulted.CompareAndSwap(false, true) && l.onResult != nil {
			l.onResult()
		}
		return false
	}
	var pg api.Ping
	if api.DecodeParams(f, &pg) != nil || pg.Seq == 0 || pg.Seq > l.sent.Load() {
		return false
	}
	for {
		cur := l.acked.Load()
		if pg.Seq <= cur || l.acked.CompareAndSwap(cur, pg.Seq) {
			break
		}
	}
	return true
}

// toolCall marks a supervisor-served tool call in flight; call the returned
// function when it is answered. The no-progress clock restarts from the answer.
func (l *liveness) toolCall() func() {
	l.tools.Add(1)
	return func() {
		l.lastFrame.Store(l.now())
		l.tools.Add(-1)
	}
}

// observe snapshots the detectors' inputs.
func (l *liveness) observe() observation {
	return observation{
		result: l.resulted.Load(),
		eof:    l.eof.Load(),
		quiet:  time.Duration(l.now() - l.lastFrame.Load()),
		missed: int(l.missed.Load()),
		busy:   l.tools.Load() > 0,
	}
}

func (l *liveness) thresholds() thresholds {
	return thresholds{
		interval: time.Duration(l.interval.Load()),
		progress: time.Duration(l.progress.Load()),
		miss:     int(l.miss.Load()),
	}
}

// lastProgress is the wall-clock time of the last progress frame (or of the
// watcher's start, or of a resume).
func (l *liveness) lastProgress() time.Time {
	return monoBase.Add(time.Duration(l.lastFrame.Load()))
}

// health classifies the child now; empty before the watcher started.
func (l *liveness) health() Health {
	t := l.thresholds()
	if t.miss == 0 {
		return ""
	}
	h, _ := classify(l.observe(), t)
	return h
}

// watch starts detectors B and C on a child that has its payload, and returns
// the function that stops them (idempotent). The watcher never writes from the
// supervise loop: pings go out on their own goroutine, bounded by the write
// deadline, so a wedged child cannot block the supervisor. It runs on timers
// (no goroutine of its own waits through a child's life): the ping tick, the
// progress timeout, and after the result frame the drain grace.
func (s *Supervisor) watch(n *node, p *proc, log *slog.Logger) (stop func()) {
	l := &p.live
	l.lastFrame.Store(l.now())
	l.interval.Store(int64(s.cfg.PingInterval))
	l.progress.Store(int64(s.cfg.ProgressTimeout))
	l.miss.Store(int32(s.cfg.PingMiss))
	w := &watcher{s: s, n: n, p: p, log: log}
	l.onResult = w.result
	w.mu.Lock()
	w.tick = time.AfterFunc(s.cfg.PingInterval, w.ticked)
	w.progress = time.AfterFunc(s.cfg.ProgressTimeout, w.progressDue)
	w.mu.Unlock()
	return w.stop
}

// watcher is one child's detectors B and C. Its timers' functions run one at
// a time (mu); each acts on the tree (stuck, notExited) only after it has
// ended the watch and let go of mu.
type watcher struct {
	s   *Supervisor
	n   *node
	p   *proc
	log *slog.Logger

	mu                     sync.Mutex
	over                   bool // stopped, or it has acted: no timer acts again
	tick, progress, drainT *time.Timer
}

// stop ends the watch (idempotent).
func (w *watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked()
}

func (w *watcher) endLocked() {
	w.over = true
	for _, t := range []*time.Timer{w.tick, w.progress, w.drainT} {
		if t != nil {
			t.Stop()
		}
	}
}

// goneLocked ends the watch of a child that was reaped or is being stopped,
// and reports whether it did (or the watch was over already).
func (w *watcher) goneLocked() bool {
	if w.over {
		return true
	}
	if w.p.exited() || w.n.stopping() {
		w.endLocked()
		return true
	}
	return false
}

// ticked is detector C: a ping every interval, stuck after PingMiss in a row
// unanswered.
func (w *watcher) ticked() {
	s, l := w.s, &w.p.live
	w.mu.Lock()
	if w.goneLocked() {
		w.mu.Unlock()
		return
	}
	if sent := l.sent.Load(); sent > 0 && l.acked.Load() < sent {
		if missed := int(l.missed.Add(1)); missed >= s.cfg.PingMiss {
			w.endLocked()
			w.mu.Unlock()
			s.stuck(w.n, api.CausePongTimeout,
				fmt.Sprintf("stuck: %d ctrl/ping in a row unanswered (every %s)", missed, s.cfg.PingInterval), w.log)
			return
		}
	} else {
		l.missed.Store(0)
	}
	w.tick.Reset(s.cfg.PingInterval)
	w.mu.Unlock()
	s.ping(w.p, w.log)
}

// progressDue is detector B: stuck after ProgressTimeout without a progress
// frame, a supervisor-served tool call in flight or a pause excepted.
func (w *watcher) progressDue() {
	s, l := w.s, &w.p.live
	w.mu.Lock()
	if w.goneLocked() {
		w.mu.Unlock()
		return
	}
	switch {
	case l.tools.Load() > 0:
		w.progress.Reset(s.cfg.ProgressTimeout)
	case s.Paused():
		// A paused child holds before its next model call on the
		// operator's word: paused time is not a stall, and the full
		// timeout starts again from the resume.
		l.lastFrame.Store(l.now())
		w.progress.Reset(s.cfg.ProgressTimeout)
	default:
		if quiet := time.Duration(l.now() - l.lastFrame.Load()); quiet < s.cfg.ProgressTimeout {
			w.progress.Reset(s.cfg.ProgressTimeout - quiet)
			break
		}
		w.endLocked()
		w.mu.Unlock()
		s.stuck(w.n, api.CauseNoProgress, fmt.Sprintf("stuck: no progress for %s", s.cfg.ProgressTimeout), w.log)
		return
	}
	w.mu.Unlock()
}

// result is the child's last word (its result frame): the detectors stand
// down and the reap should follow within DrainGrace. If it does not, the
// ladder reaps the process without overriding the result.
func (w *watcher) result() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return
	}
	w.tick.Stop()
	w.progress.Stop()
	w.drainT = time.AfterFunc(w.s.cfg.DrainGrace, w.drained)
}

func (w *watcher) drained() {
	w.mu.Lock()
	if w.over || w.p.exited() {
		w.endLocked()
		w.mu.Unlock()
		return
	}
	w.endLocked()
	w.mu.Unlock()
	w.s.notExited(w.n, "", w.log)
}

// ping writes the next ctrl/ping unless the previous write is still blocked (a
// child that stopped reading); either way the ping counts as sent, so a child
// that cannot be written to misses it.
func (s *Supervisor) ping(p *proc, log *slog.Logger) {
	seq := p.live.sent.Add(1)
	if !p.live.sending.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.live.sending.Store(false)
		if err := p.w.Send(api.MethodPing, 0, api.Ping{Seq: seq}); err != nil {
			log.Debug("ctrl/ping not delivered", "seq", seq, "err", err)
			return
		}
		s.stats.pings.Add(1)
	}()
}

// sawFrame feeds an upward frame to the detectors.
func (s *Supervisor) sawFrame(p *proc, f *api.Frame) {
	if p.live.saw(f) {
		s.stats.pongs.Add(1)
	}
}

// stuck records a stuck verdict and starts the kill ladder on n's subtree.
func (s *Supervisor) stuck(n *node, cause, detail string, log *slog.Logger) {
	log.Warn("detector: child is stuck, killing its subtree", "health", Stuck, "cause", cause, "detail", detail)
	s.killSubtree(n, verdict{status: api.StatusStalled, cause: cause, detail: detail}, cause)
}

// controlClosed classifies a child whose control-out reached EOF. It does not
// change the tree: the caller waits for the reap to confirm.
func (s *Supervisor) controlClosed(p *proc, log *slog.Logger) Health {
	p.live.eof.Store(true)
	h, _ := classify(p.live.observe(), p.live.thresholds())
	level := slog.LevelInfo
	if h == Exiting && p.live.resulted.Load() {
		level = slog.LevelDebug // the child's result came first: the ordinary end, not news
	}
	log.Log(context.Background(), level, "control-out closed: waiting for the reap", "health", h)
	return h
}

// notExited starts the ladder on a child that said it was done (sent its
// result, or closed control-out) but did not exit within the grace. With a
// result the child's status stands; without one it crashed.
func (s *Supervisor) notExited(n *node, health Health, log *slog.Logger) {
	n.mu.Lock()
	hasResult := n.result != nil
	// A process ending for a suspension (suspend.go) answers its ctrl/cancel
	// with a result and may be slow to exit: the suspension's own ladder
	// reaps it, and a stop here would end the node it keeps.
	suspending := n.hold.suspended != nil && n.hold.suspended == n.proc
	n.mu.Unlock()
	if suspending {
		return
	}
	if hasResult {
		log.Warn("no exit after its result: reaping it with the kill ladder")
		s.killSubtree(n, verdict{}, "no exit after its result")
		return
	}
	detail := "closed control-out but did not exit"
	if health != "" {
		detail += " (" + string(health) + ")"
	}
	s.killSubtree(n, verdict{status: api.StatusCrashed, cause: api.CauseExitedWithoutResult, detail: detail}, "control-out closed")
}

// capDeadline caps a payload's deadline at ChildDeadline (Detector A's
// per-child cap on top of the payload's deadline) before its node exists, so
// the child is told the capped value, a spawn held by a pause ends on it too,
// and a node's deadline never changes after its creation.
func (s *Supervisor) capDeadline(p *api.SpawnPayload) {
	if p.Limits.Deadline.D() > s.cfg.ChildDeadline {
		p.Limits.Deadline = api.Duration(s.cfg.ChildDeadline)
	}
}
