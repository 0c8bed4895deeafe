package agent

import (
	"context"
	"sync"
)

// gate holds the loop before a model call while the supervisor has paused the
// tree (ctrl/pause until ctrl/resume). It is safe for concurrent use; the zero
// value is open.
type gate struct {
	mu     sync.Mutex    // guards closed
	closed chan struct{} // non-nil while paused; closed by resume
}

// pause closes the gate; a second pause changes nothing.
func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == nil {
		g.closed = make(chan struct{})
	}
}

// resume opens the gate and releases every waiter.
func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// wait returns nil once the gate is open, or the cause of ctx ending first.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
