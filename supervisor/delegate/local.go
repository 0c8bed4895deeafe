package delegate

import (
	"context"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// LocalName is the name of the local provider, the default route.
const LocalName = "local"

// Local is the provider that runs a delegation as a supervised child process of
// this agentd. It honours every start-time capability.
type Local struct {
	Sup *supervisor.Supervisor
}

// Name returns "local".
func (Local) Name() string { return LocalName }

// Capabilities reports that the local provider honours all of them.
func (Local) Capabilities() Capabilities {
	return Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
}

// InheritsParentContext is false: a child sees only its seed.
func (Local) InheritsParentContext() bool { return false }

// Start launches a root subagent for the request. The tree nests no deeper
// than the mesh allows: to req.MaxDepth, counted from req.Depth, and at most
// req.DepthLimit levels when one is asked for.
func (l Local) Start(ctx context.Context, req Request) (Run, error) {
	r, err := l.Sup.Start(ctx, supervisor.StartRequest{Handle: req.Handle, Payload: req.Payload, MeshDepth: req.Depth, MeshMaxDepth: MeshMaxDepth(req.Depth, req.MaxDepth, req.DepthLimit), Caller: req.Caller, Questions: req.Asks,
		Resume: req.Resume, Answer: req.Answer, ObjectiveFrom: req.ObjectiveFrom})
	if err != nil {
		return nil, err
	}
	return localRun{r: r, sup: l.Sup}, nil
}

// AskingRun is implemented by a Run whose root may ask its requester a
// question (Request.Asks): each arrives on Questions, and its asker waits
// until it is answered (supervisor.Question.Answer).
type AskingRun interface {
	Questions() <-chan *supervisor.Question
}

var (
	_ TreeRun    = localRun{}
	_ SettledRun = localRun{}
	_ AskingRun  = localRun{}
)

// WaitingRun is implemented by a Run whose tree can be recorded while it
// waits for its root's answer (supervisor.Run.Waiting); WaitingChanged is
// closed at the tree's next change that may make it one, or change its
// record (supervisor.Run.WaitingChanged).
type WaitingRun interface {
	Waiting() (*api.WaitingTree, bool)
	WaitingChanged() <-chan struct{}
}

// Waiting returns the record of the run's tree while it is a waiting tree
// (WaitingRun).
func (l localRun) Waiting() (*api.WaitingTree, bool) { return l.r.Waiting() }

// WaitingChanged is closed at the tree's next change (WaitingRun).
func (l localRun) WaitingChanged() <-chan struct{} { return l.r.WaitingChanged() }

// Questions carries the root's questions when the request asked for them
// (AskingRun); nil otherwise.
func (l localRun) Questions() <-chan *supervisor.Question { return l.r.Questions() }

type localRun struct {
	r   *supervisor.Run
	sup *supervisor.Supervisor
}

func (l localRun) ID() string                 { return l.r.Handle() }
func (l localRun) Done() <-chan struct{}      { return l.r.Done() }
func (l localRun) Result() api.SubagentResult { return l.r.Result() }
func (l localRun) Cancel(reason string)       { l.sup.Cancel(l.r.Handle(), reason) }

// TreeDone is closed when every subagent of the run's tree has ended,
// detached ones included (TreeRun).
func (l localRun) TreeDone() <-chan struct{} { return l.r.TreeDone() }

// Settled is closed once the run's result is final, before its process is
// reaped (SettledRun).
func (l localRun) Settled() <-chan struct{} { return l.r.Settled() }

// SettledResult returns the final result once Settled (SettledRun).
func (l localRun) SettledResult() api.SubagentResult { return l.r.SettledResult() }
