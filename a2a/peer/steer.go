package peer

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/supervisor"
)

// A delegation to a peer is steered by a follow-up message to the peer's
// task (a message naming it): a peer that takes follow-ups (agentd does)
// runs it as the task's next turn; one that does not refuses it, and the
// steer fails with the peer's answer.

var _ supervisor.SteerableRemote = (*remoteRun)(nil)

// NotSteerable implements supervisor.SteerableRemote.
func (r *remoteRun) NotSteerable() string {
	_, why := r.steerable()
	return why
}

// steerable returns the peer's task as last seen, or why a message cannot
// be sent to it now.
func (r *remoteRun) steerable() (*a2a.Task, string) {
	r.mu.Lock()
	t := r.task
	r.mu.Unlock()
	switch {
	case t == nil || r.remote() == "":
		return nil, fmt.Sprintf("peer %s has not answered the delegation yet: no task to send the message to", r.p.cfg.Name)
	case t.Status.State.Terminal():
		return nil, fmt.Sprintf("peer %s's task %s is %s", r.p.cfg.Name, t.ID, t.Status.State)
	}
	return t, ""
}

// Steer implements supervisor.SteerableRemote.
func (r *remoteRun) Steer(ctx context.Context, text string) error {
	t, why := r.steerable()
	if why != "" {
		return fmt.Errorf("%w: %s", supervisor.ErrCannotSteer, why)
	}
	msg := a2a.NewMessageForTask(a2a.MessageRoleUser, t, a2a.TextPart{Text: text})
	sctx, cancel := context.WithTimeout(ctx, r.p.cfg.Timeout)
	defer cancel()
	if _, err := r.client.SendMessage(sctx, &a2a.MessageSendParams{Message: msg}); err != nil {
		return fmt.Errorf("%w: peer %s refused the follow-up message to its task %s: %v", supervisor.ErrCannotSteer, r.p.cfg.Name, t.ID, err)
	}
	r.p.log.Info("delegation steered: follow-up sent to the peer's task", "task_id", r.handle, "peer", r.p.cfg.Name, "remote_task_id", string(t.ID))
	return nil
}
