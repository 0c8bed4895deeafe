package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// DefaultStepBudget is how many bytes of steps a tree keeps by default
// (tasks.StepStore's budget): about a thousand tool calls of a few hundred
// bytes.
const DefaultStepBudget = 1 << 20

// stepQueue is how many steps wait for their write before the recorder
// drops new ones (counted in Dropped): a store that cannot keep up never
// blocks the supervisor.
const stepQueue = 4096

// stepBatch is how many steps the writer takes into one batch of writes.
const stepBatch = 256

// StepRecorder is the supervisor's StepObserver that keeps every tree's
// steps in a tasks.StepStore, where the console's task pages read them:
// each subagent's start and end, its model calls and its tool calls, in
// the order the supervisor heard them, written by one goroutine of its own
// in batches. Its Observer methods never block. Create
// it with NewStepRecorder and Close it after the supervisor stops.
//
// The queue holds only the steps waiting: it was a channel of stepQueue
// steps, 256 KiB allocated at start, the largest single object of a
// supervisor's live heap with 50 children waiting on their models (issue
// 35), which the collector's goal counted as live however few steps waited.
type StepRecorder struct {
	store   tasks.StepStore
	budget  int64
	log     *slog.Logger
	mu      sync.Mutex
	queue   []queuedStep  // steps waiting for the writer, at most stepQueue; under mu
	closed  bool          // under mu
	wake    chan struct{} // one token: the queue has steps, or the recorder closed
	done    chan struct{}
	once    sync.Once
	dropped atomic.Int64
	pending atomic.Int64 // steps queued and not yet written
}

type queuedStep struct {
	root a2a.TaskID
	rec  tasks.StepRecord
}

var (
	_ supervisor.Observer     = (*StepRecorder)(nil)
	_ supervisor.StepObserver = (*StepRecorder)(nil)
)

// NewStepRecorder returns a recorder writing to s, each tree within budget
// bytes (DefaultStepBudget when budget <= 0).
func NewStepRecorder(s tasks.StepStore, budget int64, log *slog.Logger) *StepRecorder {
	if budget <= 0 {
		budget = DefaultStepBudget
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &StepRecorder{store: s, budget: budget, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.run()
	return r
}

// Dropped is how many steps were not written because the queue was full.
func (r *StepRecorder) Dropped() int64 { return r.dropped.Load() }

// Close writes the steps queued and stops the recorder; later steps are
// dropped. It is idempotent.
func (r *StepRecorder) Close() {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.signal()
	})
	<-r.done
}

// signal wakes the writer, unless a wake is pending already.
func (r *StepRecorder) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Flush returns once every step queued before it is written (tests, and a
// page that reads a tree's steps right after its end).
func (r *StepRecorder) Flush(ctx context.Context) error {
	for {
		if r.pending.Load() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (r *StepRecorder) run() {
	defer close(r.done)
	for range r.wake {
		r.mu.Lock()
		steps, closed := r.queue, r.closed
		r.queue = nil // a burst's backing array goes with its steps
		r.mu.Unlock()
		for len(steps) > 0 {
			n := min(len(steps), stepBatch)
			r.write(steps[:n])
			steps = steps[n:]
		}
		if closed {
			r.mu.Lock()
			left := len(r.queue)
			r.mu.Unlock()
			if left == 0 {
				return
			}
			r.signal()
		}
	}
}

// write stores a batch of steps, each tree's in one write, in the order
// their roots were first heard.
func (r *StepRecorder) write(steps []queuedStep) {
	batch := map[a2a.TaskID][]tasks.StepRecord{}
	var order []a2a.TaskID
	for _, q := range steps {
		if _, seen := batch[q.root]; !seen {
			order = append(order, q.root)
		}
		batch[q.root] = append(batch[q.root], q.rec)
	}
	for _, root := range order {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.store.AddSteps(ctx, root, batch[root], r.budget); err != nil {
			r.log.Warn("steps not stored", "task_id", string(root), "steps", len(batch[root]), "err", err)
		}
		cancel()
	}
	r.pending.Add(-int64(len(steps)))
}

// add queues s, a step of node n.
func (r *StepRecorder) add(n supervisor.NodeInfo, s api.Step) {
	s.TaskID, s.ParentID, s.AgentPath, s.Depth = n.Handle, n.ParentHandle, n.AgentPath, n.Depth
	if s.At.IsZero() {
		s.At = time.Now().UTC()
	}
	b, err := json.Marshal(s)
	if err != nil {
		return
	}
	q := queuedStep{root: a2a.TaskID(n.RootHandle), rec: tasks.StepRecord{Kind: s.Kind, Body: b}}
	r.mu.Lock()
	switch {
	case r.closed: // a step after Close is dropped
		r.mu.Unlock()
		return
	case len(r.queue) >= stepQueue:
		r.mu.Unlock()
		r.dropped.Add(1)
		return
	}
	r.queue = append(r.queue, q)
	r.pending.Add(1)
	r.mu.Unlock()
	r.signal()
}

// NodeStarted records the subagent's start with its objective.
func (r *StepRecorder) NodeStarted(n supervisor.NodeInfo) {
	obj, cut := api.ClipStepText(n.Objective)
	r.add(n, api.Step{Kind: api.StepStart, Objective: obj, Cut: cut})
}

// NodeProgress records nothing: the steps come with NodeStep.
func (r *StepRecorder) NodeProgress(supervisor.NodeInfo) {}

// NodeFinished records the subagent's end: status, cause, usage and
// distillate.
func (r *StepRecorder) NodeFinished(n supervisor.NodeInfo, res api.SubagentResult) {
	d, cut := api.ClipStepText(res.Distillate.Text())
	u := res.Usage
	r.add(n, api.Step{Kind: api.StepEnd, Status: string(res.Status), Cause: res.Cause, Distillate: d, Usage: &u, Cut: cut})
}

// NodeStep records a model or tool call.
func (r *StepRecorder) NodeStep(n supervisor.NodeInfo, s api.Step) { r.add(n, s) }
