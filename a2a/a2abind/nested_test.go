package a2abind

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor"
)

func TestTreeObserverMirrorsNestedSubagents(t *testing.T) {
	obs := &TreeObserver{}
	cancelled := make(chan string, 1)
	exec := NewExecutor(ExecutorConfig{CancelHandle: func(handle, reason string) bool {
		cancelled <- handle
		return true
	}})
	e := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), exec, nil)
	obs.NodeAdmitted(supervisor.NodeInfo{Handle: "early", RootHandle: "root", ParentHandle: "root"}) // no engine yet: ignored
	obs.Attach(e)
	if err := e.OpenTask(context.Background(), &a2a.Task{ID: "root", ContextID: "ctx-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func(id a2a.TaskID) *a2a.Task {
		t.Helper()
		task, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		return task
	}
	if _, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: "early"}); err == nil {
		t.Fatal("a task was opened without an engine")
	}

	// The root is the executor's: the observer leaves it alone.
	obs.NodeStarted(supervisor.NodeInfo{Handle: "root", RootHandle: "root", AgentPath: "0"})
	obs.NodeFinished(supervisor.NodeInfo{Handle: "root", RootHandle: "root", AgentPath: "0"}, api.SubagentResult{Status: api.StatusCompleted})
	if got := get("root"); got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("root touched by the observer: %s", got.Status.State)
	}

	child := supervisor.NodeInfo{Handle: "child", RootHandle: "root", ParentHandle: "root", RunID: "run-1", AgentPath: "0.1",
		Objective: "look", Provider: "local", Disposition: api.DispositionAsync, State: supervisor.StateStarting}
	obs.NodeAdmitted(child)
	task := get("child")
	if task.Status.State != a2a.TaskStateSubmitted || task.ContextID != "ctx-1" || task.Metadata[api.MetaParentTask] != "root" ||
		task.Metadata[api.MetaAgentPath] != "0.1" || task.Metadata[api.MetaDisposition] != "async" || task.Metadata[api.MetaRunID] != "run-1" {
		t.Fatalf("admitted: %+v", task)
	}
	obs.NodeStarted(child) // idempotent
	obs.NodeProgress(child)
	if get("child").Status.State != a2a.TaskStateSubmitted {
		t.Fatal("working before the subagent had its payload")
	}
	child.State = supervisor.StateRunning
	obs.NodeProgress(child)
	obs.NodeProgress(child)
	if task := get("child"); task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("running: %s", task.Status.State)
	}
	obs.NodeFinished(child, api.SubagentResult{Status: api.StatusExhaustedTokens, Distillate: api.InlineText("partial"), Usage: api.Usage{TokensIn: 9}})
	task = get("child")
	if task.Status.State != a2a.TaskStateFailed || task.Metadata[api.MetaStatus] != "exhausted_tokens" || len(task.Artifacts) != 1 ||
		task.Artifacts[0].ID != ArtifactID("child") || task.Artifacts[0].Parts[0].(a2a.TextPart).Text != "partial" {
		t.Fatalf("finished: %+v", task)
	}

	// tasks/cancel on a nested task reaches the supervisor by handle and
	// returns once the subagent's end is recorded.
	leaf := supervisor.NodeInfo{Handle: "leaf", RootHandle: "root", ParentHandle: "child", AgentPath: "0.1.1", State: supervisor.StateRunning}
	obs.NodeStarted(leaf)
	go func() {
		if h := <-cancelled; h == "leaf" {
			obs.NodeFinished(leaf, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("")})
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := e.OnCancelTask(cctx, &a2a.TaskIDParams{ID: "leaf"})
	if err != nil || got.Status.State != a2a.TaskStateCanceled || got.Metadata[api.MetaParentTask] != "child" {
		t.Fatalf("cancel: %+v %v", got, err)
	}
}

// Issue 28.9: nested tasks the root caller's quota refuses were tried again,
// and logged again, at every event of their node (66 lines for one 10-node
// tree), and the root said nothing. Now each refused nested task is logged
// once, its events are dropped, and the root task counts it; the tree runs
// on, and a later turn's refusals add to the count.
func TestTreeObserverRefusedNestedTasks(t *testing.T) {
	var logs testkit.Buffer
	obs := &TreeObserver{Log: slog.New(slog.NewJSONHandler(&logs, nil))}
	// alice's quota of 3 holds her root and two nested tasks.
	e := tasks.NewEngine(tasks.NewMemoryStoreLimits(tasks.MemoryLimits{Capacity: 100, QuotaTasks: 3}), NewExecutor(ExecutorConfig{}), nil)
	obs.Attach(e)
	ctx := context.Background()
	if err := e.OpenTask(ctx, &a2a.Task{ID: "root", ContextID: "ctx-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	root := supervisor.NodeInfo{Handle: "root", RootHandle: "root", AgentPath: "0", State: supervisor.StateRunning}
	// A tree of the root and 9 nested subagents running at once, each
	// with 5 progress events.
	tree := func(turn int) {
		obs.NodeStarted(root)
		var nodes []supervisor.NodeInfo
		for i := range 9 {
			n := supervisor.NodeInfo{Handle: fmt.Sprintf("n%d-%d", turn, i), RootHandle: "root", ParentHandle: "root",
				AgentPath: fmt.Sprintf("0.%d", i), State: supervisor.StateStarting}
			obs.NodeAdmitted(n)
			obs.NodeStarted(n)
			n.State = supervisor.StateRunning
			nodes = append(nodes, n)
		}
		for range 5 {
			for _, n := range nodes {
				obs.NodeProgress(n)
			}
		}
		for _, n := range nodes {
			obs.NodeFinished(n, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("ok")})
		}
		obs.NodeFinished(root, api.SubagentResult{Status: api.StatusCompleted})
	}
	unrecorded := func() any {
		got, _, err := e.Store().Get(ctx, "root")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State != a2a.TaskStateWorking {
			t.Fatalf("the root is %s", got.Status.State)
		}
		return got.Metadata[api.MetaNestedUnrecorded]
	}
	tree(1)
	// The two first nested tasks are recorded, the seven others refused
	// (alice's quota holds three running tasks).
	recs := logs.Records("nested task not recorded")
	refused := map[string]bool{}
	for _, r := range recs {
		refused[r["task_id"].(string)] = true
	}
	if len(recs) != len(refused) {
		t.Fatalf("%d refusal lines for %d refused nested tasks: %v", len(recs), len(refused), recs)
	}
	if got := unrecorded(); len(refused) != 7 || got != len(refused) {
		t.Fatalf("the root counts %v unrecorded nested tasks, %d were refused", got, len(refused))
	}
	for h := range refused {
		if _, _, err := e.Store().Get(ctx, a2a.TaskID(h)); err == nil {
			t.Fatalf("refused nested task %s is stored", h)
		}
	}
	// The second turn's tree: the first turn's two finished nested tasks
	// make room for two, and seven more are refused.
	tree(2)
	recs = logs.Records("nested task not recorded")
	if got := unrecorded(); got != len(recs) || len(recs) != 14 {
		t.Fatalf("after the second turn the root counts %v, %d were refused in all", got, len(recs))
	}
}

// Over a durable store a nested task's large first message (its subagent's
// objective) is the store's while the subagent runs: the engine's live task
// holds none of its text, and KeptObjective reads it back whole, for the
// supervisor to keep only its head once the child has it (issue 35: in
// trees of a root and 8 children each nested subagent's 64 KiB objective
// was held, by the node and the engine's live task, for its whole life).
// tasks/get and the ended task carry it whole.
func TestTreeObserverKeepsNestedObjective(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	obs := &TreeObserver{}
	e := tasks.NewEngine(store, NewExecutor(ExecutorConfig{}), nil)
	obs.Attach(e)
	if err := e.OpenTask(ctx, &a2a.Task{ID: "root", ContextID: "ctx-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	objective := func() (string, weak.Pointer[byte]) {
		s := strings.Repeat("the nested subagent's long objective, a line of it. ", 1300) // 66 KB
		return s, weak.Make(unsafe.StringData(s))
	}
	text, wp := objective()
	n := supervisor.NodeInfo{Handle: "nested", RootHandle: "root", ParentHandle: "root", AgentPath: "0.1",
		Objective: text, State: supervisor.StateStarting}
	obs.NodeAdmitted(n)
	read := obs.KeptObjective(n)
	if read == nil {
		t.Fatal("no reader for a recorded nested task")
	}
	n.Objective, text = "", "" // the node keeps its head (supervisor/objective.go)
	runtime.GC()
	if wp.Value() != nil {
		t.Fatal("the nested task's objective is still held once the store has it")
	}
	got, err := read(ctx)
	if err != nil || len(got) != 1300*len("the nested subagent's long objective, a line of it. ") || !strings.HasPrefix(got, "the nested") {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	whole := func(id a2a.TaskID) {
		t.Helper()
		task, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if tp, ok := task.History[0].Parts[0].(a2a.TextPart); !ok || tp.Text != got {
			t.Fatalf("tasks/get %s: the first message is not the objective whole", id)
		}
	}
	whole("nested")
	n.State = supervisor.StateRunning
	obs.NodeProgress(n)
	obs.NodeFinished(n, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done")})
	whole("nested")
	if again, err := read(ctx); err != nil || again != got {
		t.Fatalf("read back after its end: %d bytes, %v", len(again), err)
	}
	// A task the store refused is not kept: no reader.
	if obs.KeptObjective(supervisor.NodeInfo{Handle: "never", RootHandle: "root", ParentHandle: "root"}) != nil {
		t.Fatal("a reader for a nested task never opened")
	}
}

// getCounter is a task store that counts its Get calls.
type getCounter struct {
	tasks.Store
	gets atomic.Int64
}

func (s *getCounter) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, string, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// Issue 35: the observer read the root's stored task for every nested task
// it opened, and the nested task's for each of its events, only for their
// contextId: each read decoded the whole task, its first message (a tree's
// objective, 64 KiB in figure 9) included, about 0.5 MB of garbage in the
// supervisor per nested child of a tree. Now the contextId of a live task
// comes from the engine (tasks.Engine.ContextOf), and a tree's events read
// no stored task.
func TestTreeObserverReadsNoStoredTask(t *testing.T) {
	ctx := context.Background()
	store := &getCounter{Store: tasks.NewMemoryStore(100, time.Hour)}
	obs := &TreeObserver{}
	e := tasks.NewEngine(store, NewExecutor(ExecutorConfig{}), nil)
	obs.Attach(e)
	big := strings.Repeat("the root's long objective. ", 2500)
	root := &a2a.Task{ID: "root", ContextID: "ctx-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: big})}}
	if err := e.OpenTask(ctx, root, ""); err != nil {
		t.Fatal(err)
	}
	before := store.gets.Load()
	for i := range 8 {
		n := supervisor.NodeInfo{Handle: fmt.Sprintf("nested-%d", i), RootHandle: "root", ParentHandle: "root",
			AgentPath: fmt.Sprintf("0.%d", i+1), Objective: big, State: supervisor.StateStarting}
		obs.NodeAdmitted(n)
		n.State = supervisor.StateRunning
		obs.NodeProgress(n)
		obs.NodeFinished(n, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done")})
	}
	if got := store.gets.Load() - before; got != 0 {
		t.Fatalf("the observer read %d stored tasks for 8 nested subagents of a live root, want 0", got)
	}
	for i := range 8 {
		task, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(fmt.Sprintf("nested-%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		if task.ContextID != "ctx-1" || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("nested-%d: context %q, state %s", i, task.ContextID, task.Status.State)
		}
	}
}
