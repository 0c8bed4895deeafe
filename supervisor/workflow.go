package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
)

// A workflow is a tree whose root is the supervisor itself rather than a
// subagent: named steps, each a spawn, run as children of that root through
// the same chokepoint (admit) as a subagent's subagent.spawn, so every cap,
// the scope narrowing and the limit clamping apply unchanged, against the
// root's grant. A step starts once every step it needs has completed, with
// their distillates as its seed slices; a step whose need did not complete
// does not run. Independent steps run side by side, at most max_inflight at
// once. The root has no process: its deadline, a cancel and a drain stop it
// through the kill ladder like any node, and its result is the workflow's.

// WorkflowStep is one step of a workflow: a spawn, and the earlier steps
// whose distillates it needs. Package workflow reads them from a file and
// checks them (names unique, needs known, no cycle).
type WorkflowStep struct {
	Name  string
	Spawn api.SpawnArgs // its disposition is ignored
	Needs []string
}

// WorkflowProvider is the provider a workflow root reports (NodeInfo.Provider):
// the supervisor runs it, no process does.
const WorkflowProvider = "workflow"

// Refusal and status texts of a workflow.
const (
	workflowNotRun = "not run: a step it needs did not complete"
)

// stepState is one step while the workflow runs.
type stepState struct {
	step    WorkflowStep
	child   *node
	res     *api.SubagentResult
	skipped bool
}

// superviseWorkflow runs n's workflow to its end and returns the root's
// result.
func (s *Supervisor) superviseWorkflow(n *node, log *slog.Logger) api.SubagentResult {
	steps := make([]*stepState, len(n.nest.workflow))
	byName := make(map[string]*stepState, len(steps))
	for i, st := range n.nest.workflow {
		steps[i] = &stepState{step: st}
		byName[st.Name] = steps[i]
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeStarted(n.info())
		s.cfg.Observer.NodeProgress(n.info())
	}
	ctx := trace.ContextWithSpan(context.Background(), n.span)
	deadline := time.NewTimer(time.Until(n.deadline))
	defer deadline.Stop()
	ended := make(chan *stepState, len(steps))
	killed := n.killed
	running := 0
	for {
		if !n.stopping() {
			for _, st := range steps {
				if running >= max(s.Caps().MaxInflight, 1) {
					break
				}
				if st.child != nil || st.res != nil || st.skipped {
					continue
				}
				ready, blocked := true, false
				for _, need := range st.step.Needs {
					dep := byName[need]
					switch {
					case dep.skipped || (dep.res != nil && dep.res.Status != api.StatusCompleted):
						blocked = true
					case dep.res == nil:
						ready = false
					}
				}
				if blocked {
					st.skipped = true
					log.Info("workflow step not run: a step it needs did not complete", "step", st.step.Name)
					continue
				}
				if !ready {
					continue
				}
				if s.startStep(ctx, n, st, byName, log) {
					running++
					go func(st *stepState) {
						<-st.child.done
						ended <- st
					}(st)
				}
			}
		}
		if running == 0 {
			break // every step has ended, was refused or will not run
		}
		select {
		case st := <-ended:
			running--
			res := st.child.final
			st.res = &res
			log.Info("workflow step ended", "step", st.step.Name, "status", res.Status, "child_task_id", st.child.handle)
			if s.cfg.Observer != nil {
				s.cfg.Observer.NodeProgress(n.info())
			}
		case <-deadline.C:
			log.Warn("deadline passed: stopping the workflow", "deadline", n.payload.Limits.Deadline.String())
			s.killSubtree(n, verdict{status: api.StatusDeadline, detail: fmt.Sprintf("deadline of %s passed", n.payload.Limits.Deadline)}, "deadline")
		case <-killed:
			// The ladder stops the running steps; their ends arrive above.
			killed = nil
		}
	}
	res := workflowResult(steps)
	n.mu.Lock()
	defer n.mu.Unlock()
	res.Usage = n.usage
	if v := n.verdict; v != nil {
		res.Status, res.Cause, res.Detail = v.status, v.cause, v.detail
	}
	return res
}

// startStep admits st as a child of the workflow root n and starts it. A
// refusal ends the step with status refused and the refusal as its detail.
func (s *Supervisor) startStep(ctx context.Context, n *node, st *stepState, byName map[string]*stepState, log *slog.Logger) bool {
	args := st.step.Spawn
	args.Disposition = api.DispositionAsync
	args.Seed.Slices = append([]api.SeedSlice(nil), args.Seed.Slices...)
	for _, need := range st.step.Needs {
		args.Seed.Slices = append(args.Seed.Slices, needSlices(need, *byName[need].res)...)
	}
	child, refusal := s.admit(n, &args, time.Now())
	if refusal != "" {
		log.Warn("workflow step refused", "step", st.step.Name, "reason", refusal)
		st.res = &api.SubagentResult{Status: api.StatusRefused, Detail: refusal, Distillate: api.InlineText(refusal)}
		return false
	}
	s.admitted(ctx, child)
	log.Info("workflow step started", "step", st.step.Name, "child_path", child.payload.AgentPath, "child_task_id", child.handle,
		"provider", child.nest.provider, "needs", st.step.Needs)
	if a, ok := s.cfg.Observer.(AdmissionObserver); ok {
		a.NodeAdmitted(child.info())
	}
	st.child = child
	go s.run(child)
	return true
}

// needSlices are the seed slices a step gets from a step it needs: the
// distillate's text, and for a stored one its reference too.
func needSlices(name string, res api.SubagentResult) []api.SeedSlice {
	text := res.Distillate.Text()
	if strings.TrimSpace(text) == "" {
		text = "(empty)"
	}
	out := []api.SeedSlice{{Label: "result of step " + name, Content: api.SeedContent{Text: text}}}
	if ref := res.Distillate.Reference; ref != nil {
		out = append(out, api.SeedSlice{Label: "full result of step " + name, Content: api.SeedContent{ResourceRef: ref.URI}})
	}
	return out
}

// workflowResult is the workflow's result from its steps': completed when
// every step completed, otherwise the status of the first step (in file
// order) that did not, naming it and the steps not run. The distillate is
// that of the last step when it is the only one nothing needs, else each
// such step's under its name.
func workflowResult(steps []*stepState) api.SubagentResult {
	needed := map[string]bool{}
	for _, st := range steps {
		for _, n := range st.step.Needs {
			needed[n] = true
		}
	}
	var sinks []*stepState
	for _, st := range steps {
		if !needed[st.step.Name] {
			sinks = append(sinks, st)
		}
	}
	res := api.SubagentResult{Status: api.StatusCompleted}
	var notRun []string
	for _, st := range steps {
		switch {
		case st.skipped || st.res == nil:
			notRun = append(notRun, st.step.Name)
		case st.res.Status != api.StatusCompleted && res.Status == api.StatusCompleted:
			res.Status, res.Cause = st.res.Status, st.res.Cause
			res.Detail = fmt.Sprintf("step %s ended %s", st.step.Name, st.res.Status)
			if st.res.Detail != "" {
				res.Detail += ": " + st.res.Detail
			}
		}
	}
	if len(notRun) > 0 {
		if res.Status == api.StatusCompleted {
			res.Status = api.StatusCancelled // stopped before every step ran
			res.Detail = "the workflow stopped"
		}
		res.Detail += "; " + workflowNotRun + ": " + strings.Join(notRun, ", ")
	}
	if len(sinks) == 1 && sinks[0].res != nil {
		res.Distillate = sinks[0].res.Distillate
		return res
	}
	var b strings.Builder
	for _, st := range sinks {
		if st.res == nil {
			continue
		}
		fmt.Fprintf(&b, "## %s (%s)\n\n%s\n\n", st.step.Name, st.res.Status, st.res.Distillate.Text())
	}
	res.Distillate = api.InlineText(strings.TrimSpace(b.String()))
	return res
}
