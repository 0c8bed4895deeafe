package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
)

// OperatorUser is implemented by an a2asrv.User that may have the operator
// role (the HTTP front's identity): an operator may read and cancel every
// task.
type OperatorUser interface {
	Operator() bool
}

// Owner returns the authenticated caller of ctx's request, or "" for none:
// the owner of the tasks it creates, and the key of its quotas.
func Owner(ctx context.Context) string { return callerName(ctx) }

// callerName is the authenticated caller of the request, or "": the owner of
// the tasks it creates.
func callerName(ctx context.Context) string {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated() {
		return cc.User.Name()
	}
	return ""
}

// mayAccess reports whether the caller of ctx may see a task created by
// owner: its creator (nested tasks belong to their root's creator), or an
// operator. In the loopback development mode every caller is the same
// anonymous peer, and so is the creator of every task.
func mayAccess(ctx context.Context, owner string) bool {
	return isOperator(ctx) || callerName(ctx) == owner
}

// isOperator reports whether the caller of ctx has the operator role.
func isOperator(ctx context.Context) bool {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil {
		if op, ok := cc.User.(OperatorUser); ok && op.Operator() {
			return true
		}
	}
	return false
}

// errNotFound is the answer for an unknown task and for someone else's: the
// two are indistinguishable, so a task id is never confirmed to a caller
// that may not see the task.
func errNotFound(id a2a.TaskID) error { return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id) }

// visible returns the task with this id if the caller of ctx may see it.
func (e *Engine) visible(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	if lt := e.getLive(id); lt != nil {
		// A task this engine runs: its latest snapshot, stored first.
		if !mayAccess(ctx, lt.owner) {
			return nil, errNotFound(id)
		}
		return e.seen(ctx, lt, e.answerBy())
	}
	type read struct {
		t     *a2a.Task
		owner string
	}
	r, err := boundedRead(e, ctx, e.answerBy(), "read task "+string(id), func(ctx context.Context) (read, error) {
		t, owner, err := e.store.Get(ctx, id)
		return read{t, owner}, err
	})
	t, owner := r.t, r.owner
	switch {
	case errors.Is(err, a2a.ErrTaskNotFound):
		return nil, errNotFound(id)
	case err != nil:
		return nil, fmt.Errorf("read task %s: %w", id, err)
	case !mayAccess(ctx, owner):
		return nil, errNotFound(id)
	}
	return t, nil
}
