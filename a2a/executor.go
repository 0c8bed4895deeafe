package a2a

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/delegate"
)

// ExecutorConfig configures an Executor.
type ExecutorConfig struct {
	Router *delegate.Router
	// CancelHandle stops a nested subagent's subtree by handle (the supervisor's
	// Cancel); it reports whether a live subagent had that handle.
	CancelHandle func(handle, reason string) bool
	// Limits are the root grant of every run: steps, tokens, deadline, breadth.
	Limits api.Limits
	// Intelligence is the model endpoint every run's subagents use.
	Intelligence api.Intelligence
	// Scope is the root tool grant.
	Scope api.ToolScope
	Log   *slog.Logger
	// ScopeFunc, if set, is asked for the root tool grant as each run starts
	// (tool servers that connect late add their tools); it beats Scope.
	ScopeFunc func() api.ToolScope
}

// Executor is the a2asrv.AgentExecutor that turns an A2A message into a
// delegation and the delegation's end into the task's final artifact and
// status. It is safe for concurrent use.
type Executor struct {
	cfg ExecutorConfig
}

// NewExecutor returns an executor.
func NewExecutor(cfg ExecutorConfig) *Executor {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg}
}

var _ a2asrv.AgentExecutor = (*Executor)(nil)

// Execute runs one delegation for the message in reqCtx: working, then the
// distillate artifact, then the terminal status. ctx is cancelled by
// tasks/cancel, which runs the kill ladder on the delegation.
func (x *Executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	req, err := x.request(reqCtx)
	if err != nil {
		return x.refuse(ctx, reqCtx, q, a2a.TaskStateRejected, err.Error())
	}
	run, err := x.cfg.Router.Start(ctx, req)
	if err != nil {
		state := a2a.TaskStateFailed
		if errors.Is(err, delegate.ErrUnsupportedCapability) {
			state = a2a.TaskStateRejected
		}
		return x.refuse(ctx, reqCtx, q, state, "delegation refused: "+err.Error())
	}
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		run.Cancel("task event refused")
		<-run.Done()
		return err
	}
	select {
	case <-run.Done():
	case <-ctx.Done():
		run.Cancel(context.Cause(ctx).Error())
		<-run.Done()
	}
	res := run.Result()
	art := &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Artifact: DistillateArtifact(reqCtx.TaskID, res), LastChunk: true}
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	return q.Write(ctx, FinalStatus(reqCtx, res))
}

func (x *Executor) refuse(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, state a2a.TaskState, text string) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text}))
	ev.Final = true
	return q.Write(ctx, ev)
}

// Cancel stops a task the engine does not drive itself: a nested subagent.
// When no live subagent has the handle any more, the task is closed as
// canceled so it cannot stay working.
func (x *Executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if x.cfg.CancelHandle != nil && x.cfg.CancelHandle(string(reqCtx.TaskID), "tasks/cancel") {
		return nil
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// request builds the delegation for a message: the text parts are the
// objective; the limits, scope and intelligence are the configured root grant.
func (x *Executor) request(reqCtx *a2asrv.RequestContext) (delegate.Request, error) {
	var texts []string
	for _, p := range reqCtx.Message.Parts {
		if t, ok := p.(a2a.TextPart); ok && strings.TrimSpace(t.Text) != "" {
			texts = append(texts, t.Text)
		}
	}
	objective := strings.Join(texts, "\n")
	if strings.TrimSpace(objective) == "" {
		return delegate.Request{}, fmt.Errorf("the message has no text to take as the objective")
	}
	scope := x.cfg.Scope
	if x.cfg.ScopeFunc != nil {
		scope = x.cfg.ScopeFunc()
	}
	return delegate.Request{
		Handle: string(reqCtx.TaskID),
		Payload: api.SpawnPayload{
			Contract:     api.OutputContract{Objective: objective, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
			Scope:        scope,
			Limits:       x.cfg.Limits,
			Intelligence: x.cfg.Intelligence,
		},
	}, nil
}
