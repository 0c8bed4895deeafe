package delegate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// Lineage is where a tree sits in the mesh: the agentd instances its request
// passed through (this one last) and the mesh depth of its root.
type Lineage struct {
	Hops     []string
	Depth    int
	MaxDepth int
}

// Lineages maps the run id of each running tree to its lineage, so a nested
// spawn that leaves this agentd carries the hop list and depth of the request
// its tree serves. It is safe for concurrent use; the zero value is empty.
type Lineages struct {
	mu sync.Mutex // guards m
	m  map[string]Lineage
}

// Set records the lineage of a tree's run.
func (l *Lineages) Set(runID string, lin Lineage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]Lineage)
	}
	lin.Hops = slices.Clone(lin.Hops)
	l.m[runID] = lin
}

// Get returns the lineage of a run; an unknown run is a root at depth 0 that
// passed through no one.
func (l *Lineages) Get(runID string) Lineage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[runID]
}

// Delete forgets a run.
func (l *Lineages) Delete(runID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, runID)
}

// ErrLocalViaDelegator refuses a Delegator call for the local provider: local
// children are spawned by the supervisor itself.
var ErrLocalViaDelegator = errors.New("delegate: the local provider is not reached through the Delegator")

// Delegator adapts the Router to supervisor.Delegator: a nested spawn that
// names a non-local provider becomes a routed, capability-checked delegation
// carrying its tree's lineage. It is safe for concurrent use.
type Delegator struct {
	Router   *Router
	Lineages *Lineages // may be nil: every tree is then a root with no hops
}

var (
	_ supervisor.Delegator     = Delegator{}
	_ supervisor.RemoteResumer = Delegator{}
)

// Delegate starts payload on provider. The supervisor has minted the identity
// and clamped the limits; the mesh depth is the tree's root depth plus the
// child's depth in the tree.
func (d Delegator) Delegate(ctx context.Context, provider, handle string, payload api.SpawnPayload) (supervisor.Remote, error) {
	run, err := d.start(ctx, provider, Request{Handle: handle, Payload: payload})
	if err != nil {
		return nil, fmt.Errorf("delegate %s to %s: %w", handle, provider, err)
	}
	return run, nil
}

// ResumeRemote resumes the delegation handle to provider whose peer's task
// waits on the question w: answer is sent to that task, and the task is
// followed on (Request.ResumeRemote).
func (d Delegator) ResumeRemote(ctx context.Context, provider, handle string, payload api.SpawnPayload, w api.WaitingRemote, answer string) (supervisor.Remote, error) {
	run, err := d.start(ctx, provider, Request{Handle: handle, Payload: payload, ResumeRemote: &w, Answer: answer})
	if err != nil {
		return nil, fmt.Errorf("resume delegation %s to %s: %w", handle, provider, err)
	}
	return run, nil
}

// start starts req on provider, a remote one, with the run's lineage (hops,
// mesh depth, its bound) and the supervisor's text and question callbacks
// of ctx.
func (d Delegator) start(ctx context.Context, provider string, req Request) (supervisor.Remote, error) {
	if provider == "" || provider == LocalName {
		return nil, ErrLocalViaDelegator
	}
	var lin Lineage
	if d.Lineages != nil {
		lin = d.Lineages.Get(req.Payload.Telemetry.RunID)
	}
	req.Provider = provider
	req.Hops, req.Depth, req.MaxDepth = lin.Hops, lin.Depth+req.Payload.Depth, lin.MaxDepth
	req.OnText, req.Ask = supervisor.RemoteText(ctx), supervisor.RemoteAsk(ctx)
	return d.Router.Start(ctx, req)
}
