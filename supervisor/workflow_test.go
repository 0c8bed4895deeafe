package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func step(name string, p prog, needs ...string) WorkflowStep {
	return WorkflowStep{Name: name, Spawn: api.SpawnArgs{Contract: api.OutputContract{Objective: p.objective()}}, Needs: needs}
}

func startWorkflow(t *testing.T, s *Supervisor, steps []WorkflowStep) *Run {
	t.Helper()
	pl := testPayload("the workflow", time.Minute)
	pl.Limits.MaxTokens = 100000
	r, err := s.Start(context.Background(), StartRequest{Payload: pl, Workflow: steps})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func waitTree(t *testing.T, r *Run) api.SubagentResult {
	t.Helper()
	select {
	case <-r.TreeDone():
	case <-time.After(30 * time.Second):
		t.Fatal("workflow did not end within 30s")
	}
	return r.Result()
}

// A workflow is one tree: its steps are children of a root with no process,
// admitted through the chokepoint in file order as their needs complete, each
// seeded with the distillates of the steps it needs; the workflow's result
// is its last step's.
func TestWorkflowRunsStepsAsOneTree(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	r := startWorkflow(t, s, []WorkflowStep{
		step("a", prog{Answer: "out of a"}),
		step("b", prog{Answer: "out of b", SleepMS: 50}),
		step("c", prog{}, "a", "b"),
		step("d", prog{Answer: "final"}, "c"),
	})
	res := waitTree(t, r)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "final" {
		t.Fatalf("workflow result %+v", res)
	}
	for path, want := range map[string]string{"0.1": "out of a", "0.2": "out of b", "0.4": "final"} {
		f, ok := rec.byPath(path)
		if !ok || f.res.Distillate.Text() != want || f.info.ParentHandle != r.Handle() || f.info.RunID != "run-test" || f.info.Depth != 1 {
			t.Fatalf("step at %s: %+v %+v", path, f.info, f.res)
		}
	}
	c, ok := rec.byPath("0.3")
	if !ok {
		t.Fatal("step c did not run at 0.3")
	}
	rep := report(t, c.res)
	var seeds []string
	for _, sl := range rep.Seed {
		seeds = append(seeds, sl.Label+"="+sl.Content.Text)
	}
	if strings.Join(seeds, ";") != "result of step a=out of a;result of step b=out of b" {
		t.Fatalf("step c's seed: %v", seeds)
	}
	if r.Info().Provider != WorkflowProvider || r.Info().PID != 0 {
		t.Fatalf("root info %+v", r.Info())
	}
}

// A step the chokepoint refuses (here: its scope widens past the root's
// grant) ends refused; the steps that need it do not run; the workflow ends
// with that status and names them.
func TestWorkflowRefusedStepStopsItsDependents(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	bad := step("fetch", prog{Answer: "never"})
	bad.Spawn.Scope.Allow = []api.ToolRef{{Server: "web", Tool: "get"}}
	r := startWorkflow(t, s, []WorkflowStep{
		bad,
		step("side", prog{Answer: "independent"}),
		step("summarize", prog{Answer: "never"}, "fetch"),
	})
	res := waitTree(t, r)
	if res.Status != api.StatusRefused || !strings.Contains(res.Detail, "step fetch ended refused: spawn denied: scope widens: web/get") ||
		!strings.Contains(res.Detail, "not run: a step it needs did not complete: summarize") {
		t.Fatalf("workflow result %+v", res)
	}
	if f, ok := rec.byPath("0.1"); !ok || f.res.Distillate.Text() != "independent" {
		t.Fatalf("the independent step: %+v %v", f, ok)
	}
	if _, ok := rec.byPath("0.2"); ok {
		t.Fatal("a step ran after its need was refused")
	}
}

// Cancelling the workflow runs the kill ladder over its running steps; the
// steps not yet started never start.
func TestWorkflowCancel(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	r := startWorkflow(t, s, []WorkflowStep{
		step("hold", prog{Hold: true}),
		step("after", prog{Answer: "never"}, "hold"),
	})
	testkit.WaitFor(t, 10*time.Second, "the first step started", func() bool {
		_, ok := rec.startedPaths()["0.1"]
		return ok
	})
	if !s.Cancel(r.Handle(), "test") {
		t.Fatal("Cancel found no workflow")
	}
	res := waitTree(t, r)
	if res.Status != api.StatusCancelled || !strings.Contains(res.Detail, "cancelled: test") {
		t.Fatalf("workflow result %+v", res)
	}
	if f, ok := rec.byPath("0.1"); !ok || f.res.Status != api.StatusCancelled {
		t.Fatalf("the running step: %+v", f)
	}
	if _, ok := rec.startedPaths()["0.2"]; ok {
		t.Fatal("a step started after the cancel")
	}
}
