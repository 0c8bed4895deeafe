package supervisor

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// tree is the bookkeeping shared by every node of one subagent tree: the
// counters the subagent.spawn chokepoint reads and the token accounting folds
// into. Each loop/event costs O(1) here: one add to the node, one to the tree.
type tree struct {
	root   *node  // immutable
	caller string // immutable: who created the tree's task (StartRequest.Caller), the blob store's quota key

	// mu guards every field below and the nest of every node of the tree.
	// Lock order: tree.mu, then Supervisor.mu, then node.mu.
	mu       sync.Mutex
	total    int              // subagents ever created in the tree, the root included
	tokens   int64            // tokens the whole tree used: the supervisor's count
	draining bool             // the tree is being torn down; no spawn passes
	bucket   bucket           // the spawn-rate token bucket
	nodes    map[string]*node // every node by handle, finished ones included (at most max_total_subagents)
	live     int              // nodes whose goroutine has not finished
	done     chan struct{}    // closed when live drops to zero

	// depthCap is the deepest depth the tree's place in the mesh leaves it
	// (StartRequest.MeshMaxDepth less MeshDepth), or -1 when only max_depth
	// applies. Immutable.
	depthCap int

	// questions carries the root's questions to whoever started the tree
	// (Run.Questions); nil when the starter takes none. Immutable.
	questions chan *Question

	// changed is closed (and replaced) when a node of the tree ends or
	// starts to wait in subagent.ask: the tree may have become a waiting
	// tree (suspend.go). Made at its first read.
	changed chan struct{}
}

// changes returns a channel closed at the tree's next change (a node ended,
// or asks).
func (t *tree) changes() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.changed
}

// change tells whoever waits on changes that the tree changed.
func (t *tree) change() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// nest is a node's part of the nesting bookkeeping. tree, disposition, provider,
// remote and exec are set before the node's goroutine starts and never change;
// inflight is guarded by tree.mu. (The children counted against max_children
// are every child ever admitted: node.children, which only grows.)
type nest struct {
	tree        *tree
	disposition api.Disposition // how its parent waits for it; empty for a root
	provider    string          // "local", or the non-local provider a remote child runs on
	remote      bool            // runs through Config.Delegator, not as a child process
	workflow    []WorkflowStep  // a workflow root: the supervisor runs these steps (workflow.go), no process
	exec        *execSpec       // the command of an exec child; nil for a subagent

	inflight int // unfinished async children, counted against max_inflight

	// spawnedBefore is how many children a node resumed from a stored
	// waiting tree had admitted that were not restored (they had ended):
	// agent paths of its new children come after theirs (suspend.go).
	spawnedBefore int
}

// newTree makes n the root of a new tree.
func newTree(n *node) *tree {
	t := &tree{
		root:     n,
		total:    1,
		nodes:    map[string]*node{n.handle: n},
		live:     1,
		done:     make(chan struct{}),
		depthCap: -1,
	}
	n.nest = nest{tree: t, provider: localProvider}
	return t
}

const localProvider = "local"

// bucket is a token bucket: burst tokens, refilled at rate per second. The zero
// value starts full at its first take. Not safe for concurrent use (tree.mu
// guards it).
type bucket struct {
	tokens float64
	last   time.Time
	primed bool
}

// take removes one token if there is one, after refilling for the time since
// the previous take. burst and rate are read at each take, so an operator's new
// caps apply at once.
func (b *bucket) take(now time.Time, burst int, rate float64) bool {
	if !b.primed {
		b.tokens, b.last, b.primed = float64(burst), now, true
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens += el.Seconds() * rate
		b.last = now
	}
	if b.tokens > float64(burst) {
		b.tokens = float64(burst)
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// account folds a loop/event's usage delta into the tree (the node's own
// counter was updated by the caller; used is its new token total) and enforces
// both budgets: a node over its own grant loses its subtree with
// exhausted_tokens, siblings spared; a tree over the ceiling drains entirely
// (the kill ladder from the root, verdict exhausted_tokens with cause
// tree_token_ceiling). Both counters are the supervisor's: what a child later
// claims in its result cannot lower them.
func (s *Supervisor) account(n *node, delta api.Usage, used int64, log *slog.Logger) {
	s.stats.tokensIn.Add(delta.TokensIn)
	s.stats.tokensOut.Add(delta.TokensOut)
	t := n.nest.tree
	ceiling := s.Caps().TreeTokenCeiling
	t.mu.Lock()
	t.tokens += delta.Tokens()
	total := t.tokens
	over := total > ceiling && !t.draining
	if over {
		t.draining = true
	}
	t.mu.Unlock()
	if over {
		log.Warn("tree token ceiling passed: draining the tree", "tokens", total, "ceiling", ceiling)
		s.killSubtree(t.root, verdict{status: api.StatusExhaustedTokens, cause: api.CauseTreeTokenCeiling,
			detail: fmt.Sprintf("the tree used %d tokens, over its ceiling of %d", total, ceiling)}, "tree token ceiling")
		return
	}
	if grant := n.payload.Limits.MaxTokens; used > grant && !n.stopping() {
		// The node is killed at once, without ctrl/cancel: its next model call
		// would spend past the grant, and the kill lands before the supervisor
		// reads the node's next frame (so before it answers another tool call).
		// A child whose loop honours its grant writes its result right after
		// this event; it is read after the reap if it reached the pipe before
		// the kill (drainFrames), and lost if the child had more to do first
		// (storing a distillate too large to inline). Its descendants go down
		// the ordinary ladder.
		log.Warn("token grant exceeded: killing the subtree", "tokens", used, "grant", grant)
		s.killAtOnce(n, verdict{status: api.StatusExhaustedTokens, detail: fmt.Sprintf("%d tokens used, grant %d", used, grant)}, "token grant exceeded")
	}
}

// nodeDone runs when a node has ended and its process is reaped, before its
// done channel closes (so an await that returns sees the parent's async slot
// already free): children that are not detached lose their parent and are
// stopped. It reports whether n was the tree's last live node; the caller then
// closes the tree's done channel after n's.
func (s *Supervisor) nodeDone(n *node) (last bool) {
	t := n.nest.tree
	t.mu.Lock()
	if p := n.parent; p != nil && n.nest.disposition == api.DispositionAsync {
		p.nest.inflight--
	}
	t.live--
	last = t.live == 0
	t.mu.Unlock()

	n.mu.Lock()
	kids := append([]*node(nil), n.children...)
	n.mu.Unlock()
	for _, c := range kids {
		if c.nest.disposition != api.DispositionDetach && !c.ended() {
			s.killSubtree(c, verdict{status: api.StatusCancelled, detail: "cancelled: its parent ended"}, "parent ended")
		}
	}
	return last
}

// ended reports whether the node has ended (its final result is set).
func (n *node) ended() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// TreeDone is closed when every subagent of the run's tree has ended and been
// reaped, detached ones included.
func (r *Run) TreeDone() <-chan struct{} { return r.n.nest.tree.done }

// TreeUsage returns the tokens the run's whole tree has used, by the
// supervisor's count.
func (r *Run) TreeUsage() int64 {
	t := r.n.nest.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tokens
}
