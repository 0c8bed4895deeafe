package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/server/console"
	"github.com/agentd/agentd/supervisor"
)

// observers is the supervisor's Observer when more than one party listens
// (the nested tasks of the engine, the console): each call goes to each, in
// order. Like every Observer, none of them blocks.
type observers []supervisor.Observer

var (
	_ supervisor.Observer          = observers(nil)
	_ supervisor.AdmissionObserver = observers(nil)
	_ supervisor.TextObserver      = observers(nil)
	_ supervisor.StepObserver      = observers(nil)
	_ supervisor.ObjectiveKeeper   = observers(nil)
)

func (o observers) NodeStarted(n supervisor.NodeInfo) {
	for _, x := range o {
		x.NodeStarted(n)
	}
}

func (o observers) NodeProgress(n supervisor.NodeInfo) {
	for _, x := range o {
		x.NodeProgress(n)
	}
}

func (o observers) NodeFinished(n supervisor.NodeInfo, r api.SubagentResult) {
	for _, x := range o {
		x.NodeFinished(n, r)
	}
}

func (o observers) NodeText(n supervisor.NodeInfo, step int, text string) {
	for _, x := range o {
		if t, ok := x.(supervisor.TextObserver); ok {
			t.NodeText(n, step, text)
		}
	}
}

func (o observers) NodeStep(n supervisor.NodeInfo, st api.Step) {
	for _, x := range o {
		if s, ok := x.(supervisor.StepObserver); ok {
			s.NodeStep(n, st)
		}
	}
}

func (o observers) NodeAdmitted(n supervisor.NodeInfo) {
	for _, x := range o {
		if a, ok := x.(supervisor.AdmissionObserver); ok {
			a.NodeAdmitted(n)
		}
	}
}

// KeptObjective is the first party's that keeps the objective.
func (o observers) KeptObjective(n supervisor.NodeInfo) func(context.Context) (string, error) {
	for _, x := range o {
		if k, ok := x.(supervisor.ObjectiveKeeper); ok {
			if f := k.KeptObjective(n); f != nil {
				return f
			}
		}
	}
	return nil
}

// consoleParts is what the console shows of a built service.
type consoleParts struct {
	sup          *supervisor.Supervisor
	engine       *tasks.Engine
	lameDuck     *server.LameDuck
	recent       *console.Recent
	admission    *admit.Controller // nil without admission control
	taskCapacity int
	steps        tasks.StepStore // nil when the store keeps none
	// questions are the questions tasks wait on (the operator's
	// a2a.Questions).
	questions func() []api.PendingQuestion
}

// consoleTasks is what the console reads of the stored tasks: through the
// engine, as tasks/list and tasks/get authorize the request's caller (the
// console is an operator's: every task), and each tree's steps.
type consoleTasks struct {
	engine *tasks.Engine
	steps  tasks.StepStore
}

func (c consoleTasks) List(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error) {
	return c.engine.ListTasks(ctx, q)
}

func (c consoleTasks) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	n := 50
	return c.engine.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id, HistoryLength: &n})
}

func (c consoleTasks) Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]tasks.StepRecord, error) {
	if c.steps == nil {
		return nil, nil
	}
	return c.steps.Steps(ctx, root, after, limit)
}

// newConsole builds the operator console over the service's parts: the
// a2a.Tree result (with the admission gauges: runs, live processes against
// their bound, the queue), the lately ended subagents, the gauges /metrics
// has (subagents and processes, the warm pool, the tasks and the store's
// capacity) and the lame-duck switch.
func newConsole(p consoleParts, log *slog.Logger) *console.Console {
	return console.New(console.Config{
		Tree: func() api.TreeResult {
			t := server.Tree(p.sup)
			t.Admission = server.AdmissionState(p.admission, p.sup)
			return t
		},
		Recent: p.recent,
		Tasks:  consoleTasks{engine: p.engine, steps: p.steps},
		Log:    log,
		Service: func() console.Service {
			return console.Service{Ready: p.lameDuck.Ready(), InFlight: p.engine.InFlight()}
		},
		Gauges:    func() []console.Gauge { return serviceGauges(p) },
		Questions: p.questions,
	})
}

// serviceGauges are the console's gauges, read when a snapshot is taken.
func serviceGauges(p consoleParts) []console.Gauge {
	live := p.sup.Live()
	procs := 0
	for _, n := range live {
		if n.PID > 0 {
			procs++
		}
	}
	pool := p.sup.Pool()
	stored := 0
	for _, n := range p.engine.TaskStates() {
		stored += n
	}
	g := []console.Gauge{{Name: "live subagents", Value: float64(len(live)), Help: "subagents of every live tree, held spawns included"}}
	if p.admission == nil { // admission's gauges show the processes against their bound
		g = append(g, console.Gauge{Name: "subagent processes", Value: float64(procs), Help: "live subagents with a process of their own"})
	}
	return append(g, []console.Gauge{
		{Name: "warm pool idle", Value: float64(pool.Idle), Max: float64(pool.Size), Help: "children started ahead of time, waiting for a payload"},
		{Name: "tasks in flight", Value: float64(p.engine.InFlight()), Help: "tasks not yet terminal"},
		{Name: "task store", Value: float64(stored), Max: float64(p.taskCapacity), Help: "tasks held, against --task-capacity"},
	}...)
}

// poked wraps the operator methods so that the console's streams look at the
// service as soon as a method returns (a pause, a cancel), instead of at
// their next tick.
func poked(methods map[string]server.Method, recent *console.Recent) map[string]server.Method {
	out := make(map[string]server.Method, len(methods))
	for name, m := range methods {
		out[name] = func(ctx context.Context, params json.RawMessage) (any, error) {
			res, err := m(ctx, params)
			recent.Changed()
			return res, err
		}
	}
	return out
}

// consoleHandler is ui as the server's Console handler: nil without one.
func consoleHandler(ui *console.Console) http.Handler {
	if ui == nil {
		return nil
	}
	return ui
}
