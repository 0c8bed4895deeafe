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

// StepRecorder is the supervisor's StepObserver that keeps every tree's
// steps in a tasks.StepStore, where the console's task pages read them:
// each subagent's start and end, its model calls and its tool calls, in
// the order the supervisor heard them, written by one goroutine of its own
// in batches. Its Observer methods never block. Create
// it with NewStepRecorder and Close it after the supervisor stops.
type StepRecorder struct {
	store   tasks.StepStore
	budget  int64
	log     *slog.Logger
	ch      chan queuedStep
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
	r := &StepRecorder{store: s, budget: budget, log: log, ch: make(chan queuedStep, stepQueue), done: make(chan struct{})}
	go r.run()
	return r
}

// Dropped is how many steps were not written because the queue was full.
func (r *StepRecorder) Dropped() int64 { return r.dropped.Load() }

// Close writes the steps queued and stops the recorder; later steps are
// dropped. It is idempotent.
func (r *StepRecorder) Close() {
	r.once.Do(func() { close(r.ch) })
	<-r.done
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
	for q := range r.ch {
		n := int64(1)
		batch := map[a2a.TaskID][]tasks.StepRecord{q.root: {q.rec}}
		order := []a2a.TaskID{q.root}
	more:
		for range 255 {
			select {
			case q, ok := <-r.ch:
				if !ok {
					break more
				}
				if _, seen := batch[q.root]; !seen {
					order = append(order, q.root)
				}
				batch[q.root] = append(batch[q.root], q.rec)
				n++
			default:
				break more
			}
		}
		for _, root := range order {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := r.store.AddSteps(ctx, root, batch[root], r.budget); err != nil {
				r.log.Warn("steps not stored", "task_id", string(root), "steps", len(batch[root]), "err", err)
			}
			cancel()
		}
		r.pending.Add(-n)
	}
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
	r.pending.Add(1)
	defer func() { // a step after Close is dropped
		if recover() != nil {
			r.pending.Add(-1)
		}
	}()
	select {
	case r.ch <- queuedStep{root: a2a.TaskID(n.RootHandle), rec: tasks.StepRecord{Kind: s.Kind, Body: b}}:
	default:
		r.pending.Add(-1)
		r.dropped.Add(1)
	}
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
