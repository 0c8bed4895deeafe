// Package delegate is the delegation router: a named registry of providers
// (local re-exec'd children, remote A2A peers), the start-time capability check
// that refuses loudly, and the routing rules that pick a provider for each
// delegation.
//
// A provider's Start returns a Run whose Result never fails on child failure: a
// child that crashed, refused or ran out of budget is a value with a status.
// Errors are reserved for the delegation machinery itself.
package delegate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentd/agentd/api"
)

// Capabilities are the start-time features a provider may honour. A request
// that needs one its provider lacks is refused before Start.
type Capabilities struct {
	OutputSchema bool // validates a JSON output_format schema
	DepthLimit   bool // enforces a depth limit on its own nesting
	ToolFilter   bool // restricts the child to the requested tool scope
}

// Provider starts delegations on one backend. Implementations are safe for
// concurrent use.
type Provider interface {
	Name() string
	Capabilities() Capabilities
	// InheritsParentContext reports whether children see the parent's context
	// (a fork). agentd's providers never do: children get only the seed.
	InheritsParentContext() bool
	Start(ctx context.Context, req Request) (Run, error)
}

// Request is one delegation: who it is for and what it carries.
type Request struct {
	// Handle is the delegation's id (the A2A task id of the child).
	Handle string
	// Payload carries the contract, seed, scope, limits, telemetry and
	// intelligence. Identity fields are minted by the provider.
	Payload api.SpawnPayload
	// Provider names the provider explicitly; empty lets the rules decide.
	Provider string
	// Skill is the A2A skill the request names, for routing rules.
	Skill string
	// Hops lists the agentd instances this delegation has passed through, for
	// cycle detection across the mesh.
	Hops []string
	// Depth is the mesh-wide depth the delegated work sits at: 0 for a root
	// message from a plain client. A remote provider counts the hop itself as
	// one more level.
	Depth int
	// MaxDepth is the mesh-wide depth cap; 0 leaves it to each provider.
	MaxDepth int
	// DepthLimit, when positive, is a limit the requester sets on how many
	// levels the delegate may nest below itself, which the delegate must
	// enforce (the depth_limit capability). Zero asks for none: the
	// delegate's own caps apply, and a delegate outside the mesh is a leaf.
	DepthLimit int
	// Caller is the authenticated caller the delegation serves (the task's
	// owner; "" when anonymous): what the tree stores counts against its
	// quotas.
	Caller string
	// OnText, if set, is handed the delegate's text as it streams (a peer's
	// artifact updates): step counts the pieces that start it over, text is
	// one piece. It is shown, never part of the result. Nil: not streamed.
	OnText func(step int, text string) `json:"-"`
	// Asks says the requester takes the root's questions (subagent.ask):
	// a provider whose Run is an AskingRun hands them over on Questions,
	// which the requester must then read.
	Asks bool
	// Ask, if set, takes the delegate's questions one at a time (a peer's
	// task that stops at input-required or auth-required) and returns the
	// answer, or ctx's cause: a nested spawn's (supervisor.RemoteAsk). It
	// comes before Asks. Nil and Asks unset: nobody can be asked.
	Ask func(ctx context.Context, q api.Question) (string, error) `json:"-"`
	// Resume, if set, starts a local tree from a stored waiting tree (its
	// root's handle is Handle) with Answer as its question's answer
	// (supervisor.StartRequest.Resume); other providers refuse it.
	Resume *api.WaitingTree `json:"-"`
	Answer string           `json:"-"`
	// ResumeRemote, if set, resumes a delegation to a peer whose task
	// waits on the question it names (a remote child of a stored or
	// suspended waiting tree): the provider sends Answer to that task,
	// not a new delegation, and follows it on. Only a peer provider of
	// that name takes it.
	ResumeRemote *api.WaitingRemote `json:"-"`
	// ObjectiveFrom, if set, reads the payload's objective back from where
	// the requester keeps it (the task store): a local tree then keeps only
	// its head once the root's child has it (supervisor.StartRequest's).
	ObjectiveFrom func(context.Context) (string, error) `json:"-"`
}

// MeshMaxDepth is the deepest mesh depth a delegate whose root sits at depth
// may reach: maxDepth (0 for no cap), lowered to depth+depthLimit when the
// requester sets a depth limit (depthLimit > 0). Every provider enforces it
// the same way: the local one on its tree, a peer provider by sending it on.
func MeshMaxDepth(depth, maxDepth, depthLimit int) int {
	if depthLimit > 0 && (maxDepth <= 0 || depth+depthLimit < maxDepth) {
		return depth + depthLimit
	}
	return maxDepth
}

// Preparer is implemented by a provider that must do some I/O (reading a
// remote agent card) before its Capabilities are meaningful. The router calls
// Prepare before checking capabilities; an error refuses the request.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// Run is one started delegation. Implementations are safe for concurrent use.
type Run interface {
	ID() string
	// Done is closed when the delegation has ended.
	Done() <-chan struct{}
	// Result blocks until Done and returns the outcome. It never fails: a failed
	// child is a result with a status.
	Result() api.SubagentResult
	// Cancel asks the delegation to stop; the result's status becomes cancelled.
	Cancel(reason string)
}

// TreeRun is implemented by a Run whose delegation can outlive its result:
// subagents it started detached keep running after Done. TreeDone is closed
// when the last of them has ended. A Run without it has nothing left running
// once Done is closed.
type TreeRun interface {
	TreeDone() <-chan struct{}
}

// SettledRun is implemented by a Run whose result can be final before Done:
// a local subagent's result is final once its result frame is read, while
// its process is still exiting. Settled is closed then (at Done at the
// latest), and SettledResult returns the result, blocking until Settled.
// Done still says when the delegation has ended (its process reaped).
type SettledRun interface {
	Settled() <-chan struct{}
	SettledResult() api.SubagentResult
}

// Errors of the router.
var (
	ErrUnknownProvider = errors.New("delegate: unknown provider")
	// ErrUnsupportedCapability is the seam's loud refusal: UNSUPPORTED_CAPABILITY.
	ErrUnsupportedCapability = errors.New("UNSUPPORTED_CAPABILITY")
)

// AnySkill is the rule skill that matches every request.
const AnySkill = "*"

// Rule routes a request naming Skill to Provider. The skill AnySkill matches
// every request.
type Rule struct {
	Skill    string
	Provider string
}

// Router is the named provider registry. It is safe for concurrent use. The
// zero value is an empty router.
type Router struct {
	mu        sync.RWMutex // guards providers, rules
	providers map[string]Provider
	rules     []Rule
}

// Register adds p under its name; a name can be registered once.
func (r *Router) Register(p Provider) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.providers == nil {
		r.providers = make(map[string]Provider)
	}
	if _, dup := r.providers[p.Name()]; dup {
		return fmt.Errorf("delegate: provider %q registered twice", p.Name())
	}
	r.providers[p.Name()] = p
	return nil
}

// Provider returns the provider registered under name.
func (r *Router) Provider(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.providers[name]
	return p, ok
}

// SetRules replaces the routing rules; the first match wins.
func (r *Router) SetRules(rules []Rule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append([]Rule(nil), rules...)
}

// Providers returns the registered provider names, sorted.
func (r *Router) Providers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.providers))
	for n := range r.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Route picks the provider for req: the one it names, else the first matching
// rule, else "local".
func (r *Router) Route(req Request) (Provider, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	name := req.Provider
	if name == "" {
		for _, rule := range r.rules {
			if rule.Skill == AnySkill || (rule.Skill != "" && rule.Skill == req.Skill) {
				name = rule.Provider
				break
			}
		}
	}
	if name == "" {
		name = LocalName
	}
	p, ok := r.providers[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownProvider, name)
	}
	return p, nil
}

// Start routes req, checks the start-time capabilities it needs against the
// provider's, and starts it. A missing capability is refused with
// ErrUnsupportedCapability, never accepted and ignored.
func (r *Router) Start(ctx context.Context, req Request) (Run, error) {
	p, err := r.Route(req)
	if err != nil {
		return nil, err
	}
	if pr, ok := p.(Preparer); ok {
		if err := pr.Prepare(ctx); err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name(), err)
		}
	}
	if err := CheckCapabilities(p.Capabilities(), Needs(req)); err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name(), err)
	}
	if req.Resume != nil && p.Name() != LocalName {
		return nil, fmt.Errorf("provider %s: a stored waiting tree resumes only on the local provider: %w", p.Name(), ErrUnsupportedCapability)
	}
	if req.ResumeRemote != nil && p.Name() != req.ResumeRemote.Peer {
		return nil, fmt.Errorf("provider %s: a delegation to peer %q resumes only on it: %w", p.Name(), req.ResumeRemote.Peer, ErrUnsupportedCapability)
	}
	return p.Start(ctx, req)
}

// Needs returns the start-time capabilities req asks for: an output schema
// (JSON output with a schema), a depth limit (Request.DepthLimit), a tool
// filter (a non-empty tool allowlist). The limits every request carries
// (steps, tokens, deadline, breadth) need none: they are enforced by the
// caller too (the deadline locally, usage as reported).
func Needs(req Request) Capabilities {
	f := req.Payload.Contract.OutputFormat
	return Capabilities{
		OutputSchema: f.Kind == api.FormatJSON && len(f.Schema) > 0,
		DepthLimit:   req.DepthLimit > 0,
		ToolFilter:   len(req.Payload.Scope.Allow) > 0,
	}
}

// CheckCapabilities refuses needs that have lacks.
func CheckCapabilities(has, needs Capabilities) error {
	var missing []string
	if needs.OutputSchema && !has.OutputSchema {
		missing = append(missing, "output_schema")
	}
	if needs.DepthLimit && !has.DepthLimit {
		missing = append(missing, "depth_limit")
	}
	if needs.ToolFilter && !has.ToolFilter {
		missing = append(missing, "tool_filter")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %v", ErrUnsupportedCapability, missing)
	}
	return nil
}

// ParseRule parses a routing rule as the --route flag writes it:
// SKILL=PROVIDER, where SKILL may be AnySkill ("*").
func ParseRule(s string) (Rule, error) {
	skill, provider, ok := strings.Cut(s, "=")
	skill, provider = strings.TrimSpace(skill), strings.TrimSpace(provider)
	if !ok || skill == "" || provider == "" || strings.ContainsAny(skill+provider, " ,=") {
		return Rule{}, fmt.Errorf("route %q: want SKILL=PROVIDER (SKILL may be %q), such as research=peer:b", s, AnySkill)
	}
	return Rule{Skill: skill, Provider: provider}, nil
}
