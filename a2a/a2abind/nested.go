package a2abind

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// TreeObserver is the supervisor.Observer that makes every nested subagent an
// A2A task too: same contextId as its tree's root task, the parent's task id,
// agent path and run id in metadata, working while it runs, then its distillate
// as the final artifact and its terminal state. tasks/get works on the handle
// while the subagent runs and after; tasks/cancel on it reaches the supervisor
// through the executor's CancelHandle. Roots are skipped: the Executor drives
// their tasks.
//
// A nested task the store refuses (the root caller's task quota, a full
// store) is not recorded, and the subagent runs on: the store bounds what is
// kept, not what runs (the chokepoint has admitted it). The refusal is
// logged once for that nested task, its later events are dropped, and the
// root task says so: a working status update whose metadata
// api.MetaNestedUnrecorded counts the nested tasks of the root not recorded.
//
// It is safe for concurrent use. The zero value ignores every event until
// Attach gives it an engine.
type TreeObserver struct {
	engine atomic.Pointer[tasks.Engine]
	Log    *slog.Logger
	// PublicURL is the service's base URL, for links to stored distillates; set
	// it before Attach.
	PublicURL string

	mu         sync.Mutex        // guards opened, unrecorded; lock order: mu, then the engine's (OpenTask, Update)
	opened     map[string]opened // nested tasks not yet final, by handle
	unrecorded map[string]int    // by root handle, while the root's node lives: nested tasks refused

	textMu sync.Mutex     // guards steps
	steps  map[string]int // by handle, while the node lives: the step of its latest text (NodeText)
}

// opened is a nested task's state: refused ones were not recorded.
type opened struct{ working, refused bool }

var _ supervisor.Observer = (*TreeObserver)(nil)

// Attach sets the engine the tasks are kept in. The engine is built after the
// supervisor (its executor needs the supervisor), hence the late binding.
func (o *TreeObserver) Attach(e *tasks.Engine) { o.engine.Store(e) }

func (o *TreeObserver) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// open registers the nested task on first sight of its node; it reports
// whether the task exists. A task the store refuses is tried once: the
// refusal is logged and counted on the root task (refused), and later
// events of the node find it refused.
func (o *TreeObserver) open(e *tasks.Engine, n supervisor.NodeInfo) (opened, bool) {
	st, ok, err := o.openOnce(e, n)
	if err != nil {
		o.refused(e, n, err)
	}
	return st, ok
}

// openOnce is open's registration, under the lock: err is the store's
// refusal, on the node's first sight only.
func (o *TreeObserver) openOnce(e *tasks.Engine, n supervisor.NodeInfo) (opened, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.opened[n.Handle]; ok {
		return st, !st.refused, nil
	}
	if o.opened == nil {
		o.opened = make(map[string]opened)
	}
	ctxID, _ := e.ContextOf(context.Background(), a2a.TaskID(n.RootHandle))
	if ctxID == "" {
		ctxID = a2a.NewContextID()
	}
	id := a2a.TaskID(n.Handle)
	msg := &a2a.Message{
		ID:        a2a.NewMessageID(),
		Role:      a2a.MessageRoleUser,
		Parts:     a2a.ContentParts{a2a.TextPart{Text: n.Objective}},
		TaskID:    id,
		ContextID: ctxID,
	}
	task := &a2a.Task{
		ID:        id,
		ContextID: ctxID,
		Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: now()},
		History:   []*a2a.Message{msg},
		Metadata: map[string]any{
			api.MetaParentTask:  n.ParentHandle,
			api.MetaAgentPath:   n.AgentPath,
			api.MetaRunID:       n.RunID,
			api.MetaProvider:    n.Provider,
			api.MetaDisposition: string(n.Disposition),
			api.MetaKind:        n.Kind,
			api.MetaStarted:     time.Now().UTC().Format(time.RFC3339Nano),
		},
	}
	if err := e.OpenTask(context.Background(), task, a2a.TaskID(n.RootHandle)); err != nil {
		o.opened[n.Handle] = opened{refused: true}
		return opened{refused: true}, false, err
	}
	o.opened[n.Handle] = opened{}
	return opened{}, true, nil
}

// refused logs a nested task the store refused and counts it on its root
// task (api.MetaNestedUnrecorded). The count lives here while the root's node
// does, and starts, for the root's next turn, from what the stored root
// says.
func (o *TreeObserver) refused(e *tasks.Engine, n supervisor.NodeInfo, err error) {
	o.log().Warn("nested task not recorded", "task_id", n.Handle, "root_task", n.RootHandle, "agent_path", n.AgentPath, "err", err)
	root := a2a.TaskID(n.RootHandle)
	info := &a2a.Task{ID: root}
	var before int
	if t, _, err := e.Store().Get(context.Background(), root); err == nil {
		info.ContextID = t.ContextID
		if v, ok := t.Metadata[api.MetaNestedUnrecorded].(float64); ok {
			before = int(v)
		} else if v, ok := t.Metadata[api.MetaNestedUnrecorded].(int); ok {
			before = v
		}
	}
	o.mu.Lock()
	if o.unrecorded == nil {
		o.unrecorded = make(map[string]int)
	}
	count, seen := o.unrecorded[n.RootHandle]
	if !seen {
		count = before
	}
	count++
	o.unrecorded[n.RootHandle] = count
	// Under the lock, so that the root's counts arrive in order.
	ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, nil)
	ev.Metadata = map[string]any{api.MetaNestedUnrecorded: count}
	if err := e.Update(context.Background(), root, ev); err != nil {
		delete(o.unrecorded, n.RootHandle) // the root has ended, or is not here
		o.log().Debug("root task not told of an unrecorded nested task", "task_id", n.RootHandle, "err", err)
	}
	o.mu.Unlock()
}

// taskInfo names a nested task for its events: its id and its context.
func taskInfo(e *tasks.Engine, handle string) *a2a.Task {
	info := &a2a.Task{ID: a2a.TaskID(handle)}
	info.ContextID, _ = e.ContextOf(context.Background(), info.ID)
	return info
}

var _ supervisor.AdmissionObserver = (*TreeObserver)(nil)

// NodeAdmitted opens the nested task (submitted) as soon as the chokepoint has
// admitted the subagent, before its handle reaches anyone.
func (o *TreeObserver) NodeAdmitted(n supervisor.NodeInfo) {
	if e := o.engine.Load(); e != nil && n.ParentHandle != "" {
		o.open(e, n)
	}
}

var _ supervisor.ObjectiveKeeper = (*TreeObserver)(nil)

// KeptObjective reads a nested subagent's objective back from its task's
// first message, which the task store keeps (the engine leaves a large one
// to a durable store: tasks.Engine.OpenTask), so that the supervisor keeps
// only its head once the child has it. It is nil for a task not recorded
// (the store refused it: the node keeps its objective).
func (o *TreeObserver) KeptObjective(n supervisor.NodeInfo) func(context.Context) (string, error) {
	e := o.engine.Load()
	if e == nil || n.ParentHandle == "" {
		return nil
	}
	o.mu.Lock()
	st, ok := o.opened[n.Handle]
	o.mu.Unlock()
	if !ok || st.refused {
		return nil
	}
	id := a2a.TaskID(n.Handle)
	return func(ctx context.Context) (string, error) {
		m, err := e.FirstMessage(ctx, id)
		if err != nil {
			return "", err
		}
		if len(m.Parts) != 1 {
			return "", fmt.Errorf("nested task %s's first message has %d parts, want its objective's one", id, len(m.Parts))
		}
		tp, ok := m.Parts[0].(a2a.TextPart)
		if !ok {
			return "", fmt.Errorf("nested task %s's first message is not its objective's text", id)
		}
		return tp.Text, nil
	}
}

// NodeStarted opens the nested task if it is not open yet.
func (o *TreeObserver) NodeStarted(n supervisor.NodeInfo) {
	if e := o.engine.Load(); e != nil && n.ParentHandle != "" {
		o.open(e, n)
	}
}

// NodeProgress marks the nested task working once the subagent has its
// payload.
func (o *TreeObserver) NodeProgress(n supervisor.NodeInfo) {
	e := o.engine.Load()
	if e == nil || n.ParentHandle == "" || n.State != supervisor.StateRunning {
		return
	}
	st, ok := o.open(e, n)
	if !ok || st.working {
		return
	}
	info := taskInfo(e, n.Handle)
	if err := e.Update(context.Background(), info.ID, a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, nil)); err != nil {
		o.log().Warn("nested task not marked working", "task_id", n.Handle, "err", err)
		return
	}
	o.mu.Lock()
	if _, live := o.opened[n.Handle]; live {
		o.opened[n.Handle] = opened{working: true}
	}
	o.mu.Unlock()
}

// NodeFinished writes the distillate artifact and the terminal status.
func (o *TreeObserver) NodeFinished(n supervisor.NodeInfo, res api.SubagentResult) {
	e := o.engine.Load()
	o.endText(e, n, res)
	if e == nil {
		return
	}
	if n.ParentHandle == "" {
		o.mu.Lock()
		delete(o.unrecorded, n.Handle) // the root's turn is over
		o.mu.Unlock()
		return
	}
	defer func() {
		o.mu.Lock()
		delete(o.opened, n.Handle)
		o.mu.Unlock()
	}()
	if _, ok := o.open(e, n); !ok {
		return
	}
	info := taskInfo(e, n.Handle)
	if HasArtifact(res) {
		art := &a2a.TaskArtifactUpdateEvent{TaskID: info.ID, ContextID: info.ContextID, Artifact: DistillateArtifactAt(info.ID, res, o.PublicURL), LastChunk: true}
		if err := e.Update(context.Background(), info.ID, art); err != nil {
			o.log().Warn("nested task artifact not recorded", "task_id", n.Handle, "err", err)
			return
		}
	}
	if err := e.Update(context.Background(), info.ID, FinalStatus(info, res)); err != nil {
		o.log().Warn("nested task final state not recorded", "task_id", n.Handle, "err", err)
	}
}

var _ supervisor.TextObserver = (*TreeObserver)(nil)

// NodeText shows a piece of a subagent's model text, as it streams, to the
// streaming clients of its task (its distillate artifact growing: the first
// piece of a step starts it over, the later ones append) and, for a nested
// subagent, of its parent's and its root's tasks (its distillate artifact
// too, with api.MetaStreamTask and api.MetaAgentPath naming it). Nothing is
// stored: the artifact is written whole when the subagent ends
// (tasks.Engine.Stream). A task that is not live here (not recorded, or
// ended) is skipped.
func (o *TreeObserver) NodeText(n supervisor.NodeInfo, step int, text string) {
	e := o.engine.Load()
	if e == nil {
		return
	}
	o.textMu.Lock()
	if o.steps == nil {
		o.steps = make(map[string]int)
	}
	last, seen := o.steps[n.Handle]
	o.steps[n.Handle] = step
	o.textMu.Unlock()
	id := a2a.TaskID(n.Handle)
	ev := func(task a2a.TaskID, meta map[string]any) *a2a.TaskArtifactUpdateEvent {
		return &a2a.TaskArtifactUpdateEvent{TaskID: task, Append: seen && last == step, Metadata: meta,
			Artifact: &a2a.Artifact{ID: ArtifactID(id), Name: "distillate", Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}}
	}
	ctx := context.Background()
	_ = e.Stream(ctx, id, ev(id, nil))
	if n.ParentHandle == "" {
		return
	}
	meta := map[string]any{api.MetaStreamTask: n.Handle, api.MetaAgentPath: n.AgentPath}
	_ = e.Stream(ctx, a2a.TaskID(n.ParentHandle), ev(a2a.TaskID(n.ParentHandle), meta))
	if n.RootHandle != n.ParentHandle {
		_ = e.Stream(ctx, a2a.TaskID(n.RootHandle), ev(a2a.TaskID(n.RootHandle), meta))
	}
}

// endText drops what NodeText keeps of a node that ended and, for a nested
// one that streamed text, ends its stream in its parent's and its root's
// tasks with its distillate artifact.
func (o *TreeObserver) endText(e *tasks.Engine, n supervisor.NodeInfo, res api.SubagentResult) {
	o.textMu.Lock()
	_, seen := o.steps[n.Handle]
	delete(o.steps, n.Handle)
	o.textMu.Unlock()
	if !seen || n.ParentHandle == "" || e == nil {
		return
	}
	art := DistillateArtifactAt(a2a.TaskID(n.Handle), res, o.PublicURL)
	meta := map[string]any{api.MetaStreamTask: n.Handle, api.MetaAgentPath: n.AgentPath}
	for _, t := range []string{n.ParentHandle, n.RootHandle} {
		_ = e.Stream(context.Background(), a2a.TaskID(t), &a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(t), Artifact: art, LastChunk: true, Metadata: meta})
		if n.RootHandle == n.ParentHandle {
			break
		}
	}
}
