package console

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// The recorder keeps a tree's steps under its root, in the order heard,
// each with its subagent's id, parent and path; texts past
// api.MaxStepText are cut and the cut said; the tree's budget holds.
func TestStepRecorder(t *testing.T) {
	ctx := context.Background()
	s := tasks.NewMemoryStore(100, 0)
	now := time.Now()
	if err := s.Create(ctx, &a2a.Task{ID: "root", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}}, ""); err != nil {
		t.Fatal(err)
	}
	r := NewStepRecorder(s, 64<<10, nil)
	defer r.Close()
	root := supervisor.NodeInfo{Handle: "root", RootHandle: "root", AgentPath: "0", Objective: "line one\nline two"}
	child := supervisor.NodeInfo{Handle: "kid", ParentHandle: "root", RootHandle: "root", AgentPath: "0.1", Depth: 1}
	r.NodeStarted(root)
	r.NodeStep(root, api.Step{Kind: api.StepModel, Step: 1, TokensIn: 9, TokensOut: 2, DurationMS: 5, Endpoint: "http://model/v1 (model m)"})
	r.NodeStarted(child)
	big := strings.Repeat("x", api.MaxStepText+10)
	r.NodeStep(child, api.Step{Kind: api.StepTool, Tool: "mcp/read", Args: "{}", Result: big, Cut: 10})
	r.NodeFinished(child, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done")})
	r.NodeFinished(root, api.SubagentResult{Status: api.StatusCrashed, Cause: api.CauseNoProgress, Distillate: api.InlineText(big)})
	r.NodeStarted(supervisor.NodeInfo{Handle: "other", RootHandle: "unknown"}) // a task the store does not hold
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.Flush(ctxT); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Steps(ctx, "root", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range recs {
		var st api.Step
		if err := json.Unmarshal(rec.Body, &st); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec.Kind+" "+st.TaskID+" "+st.ParentID+" "+st.AgentPath)
		switch {
		case rec.Kind == api.StepStart && st.TaskID == "root" && st.Objective != "line one\nline two":
			t.Errorf("start %+v", st)
		case rec.Kind == api.StepModel && (st.TokensIn != 9 || st.DurationMS != 5 || st.Endpoint != "http://model/v1 (model m)"):
			t.Errorf("model %+v", st)
		case rec.Kind == api.StepEnd && st.TaskID == "root" && (len(st.Distillate) != api.MaxStepText || st.Cut != 10 || st.Cause != api.CauseNoProgress):
			t.Errorf("root's end: %d bytes, cut %d, %+v", len(st.Distillate), st.Cut, st.Cause)
		}
	}
	want := "start root  0|model root  0|start kid root 0.1|tool kid root 0.1|end kid root 0.1|end root  0"
	if strings.Join(got, "|") != want {
		t.Fatalf("steps:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if r.Dropped() != 0 {
		t.Errorf("dropped %d", r.Dropped())
	}
}

// gatedSteps is a StepStore whose AddSteps waits for its gate once it has
// said it was entered, and counts the steps it is given.
type gatedSteps struct {
	entered chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	n       int
}

func (g *gatedSteps) AddSteps(_ context.Context, _ a2a.TaskID, recs []tasks.StepRecord, _ int64) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	g.mu.Lock()
	g.n += len(recs)
	g.mu.Unlock()
	return nil
}

func (g *gatedSteps) Steps(context.Context, a2a.TaskID, int64, int) ([]tasks.StepRecord, error) {
	return nil, nil
}

// The recorder's queue holds only the steps waiting (issue 35: it was a
// channel of stepQueue steps, 256 KiB allocated at start): a new recorder
// allocates a few hundred bytes; while its store does not keep up, stepQueue
// steps wait and the rest are dropped and counted, the supervisor never
// blocked; once the store goes on, every queued step is written; a step
// after Close is dropped.
func TestStepRecorderQueue(t *testing.T) {
	g := &gatedSteps{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewStepRecorder(g, 0, nil)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<10 {
		t.Errorf("NewStepRecorder allocated %d B, want at most 16 KiB", got)
	}
	n := supervisor.NodeInfo{Handle: "root", RootHandle: "root"}
	r.NodeStep(n, api.Step{Kind: api.StepModel})
	select {
	case <-g.entered: // the writer holds the first step, in the store
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not take the first step")
	}
	for range stepQueue + 5 {
		r.NodeStep(n, api.Step{Kind: api.StepModel})
	}
	if d := r.Dropped(); d != 5 {
		t.Errorf("dropped %d, want 5", d)
	}
	close(g.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.NodeStep(n, api.Step{Kind: api.StepModel})
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n != 1+stepQueue {
		t.Errorf("stored %d steps, want %d", g.n, 1+stepQueue)
	}
	if d := r.Dropped(); d != 5 {
		t.Errorf("dropped %d after Close, want 5", d)
	}
}
