package a2abind

import (
	"fmt"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/delegate"
)

// A follow-up message becomes the objective of the task's next turn, whose
// spawn payload also carries the first message's seed and the turns so far:
// a follow-up that would take that payload over the control frame limit is
// refused when it is sent (tasks.FollowUpChecker), and the task goes on,
// where the turn would fail to start and the whole task end rejected.

// turnReserve is what the turns a follow-up may wait behind add to the next
// turn's seed, at most: two turns' request and answer, each clipped to
// maxSeedText and encoded at most six times as long ('<' as \u003c), with
// their labels.
const turnReserve = 2 * 2 * (6*(maxSeedText+len(" [clipped]")) + 128)

// nextTurns holds each running task's request, its run's own (by pointer,
// not a copy of it a task), from which CheckFollowUp sizes the task's next
// turn. From set on, the run changes the request's Payload only with mu
// held, and CheckFollowUp copies the Payload with mu held. It is safe for
// concurrent use; the zero value is empty.
type nextTurns struct {
	mu sync.Mutex // guards m, and the Payload of each request in it
	m  map[a2a.TaskID]*delegate.Request
}

// set makes r the request of task id's next turn; its Payload changes only
// with n.mu held from now on.
func (n *nextTurns) set(id a2a.TaskID, r *delegate.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = make(map[a2a.TaskID]*delegate.Request)
	}
	n.m[id] = r
}

func (n *nextTurns) drop(id a2a.TaskID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, id)
}

// payload returns a copy of the payload of task id's next turn as it
// stands.
func (n *nextTurns) payload(id a2a.TaskID) (api.SpawnPayload, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.m[id]
	if !ok {
		return api.SpawnPayload{}, false
	}
	return r.Payload, true
}

var _ tasks.FollowUpChecker = (*Executor)(nil)

// CheckFollowUp implements tasks.FollowUpChecker: it refuses the follow-ups
// (the ones waiting and the new one, last) when the task's next turn, their
// text as its objective, would be a spawn payload over the control frame
// limit (ExecutorConfig.MaxFrame), less turnReserve for the turns still to
// join its seed. A task not running here is not checked.
func (x *Executor) CheckFollowUp(id a2a.TaskID, waiting []*a2a.Message) error {
	p, ok := x.next.payload(id)
	if !ok {
		return nil
	}
	p.Contract.Objective = followUpObjective(waiting)
	n, err := api.FrameSize(api.MethodSpawn, 0, &p)
	if err != nil {
		return fmt.Errorf("%w: the follow-up does not encode: %v", a2a.ErrInvalidParams, err)
	}
	limit := x.cfg.MaxFrame
	if limit <= 0 {
		limit = api.DefaultMaxFrame
	}
	if n+turnReserve > limit {
		return fmt.Errorf("%w: with this follow-up, task %s's next turn would be a spawn payload of %d bytes (the first message's seed and the text of the %d follow-up message(s) waiting), over the control frame limit of %d bytes (--max-message plus %d) less %d bytes kept for the turns before it: send a shorter follow-up, or a new message",
			a2a.ErrInvalidParams, id, n, len(waiting), limit, api.PayloadEnvelope, turnReserve)
	}
	return nil
}
