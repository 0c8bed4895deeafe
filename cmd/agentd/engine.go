package main

import (
	"context"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/delegate"
)

// openEngine builds the task engine: the A2A executor over the router, the
// task store and the push sender (closed with the service), which journals
// its deliveries in a durable store.
func (s *service) openEngine(c *serveConfig, store tasks.Store, router *delegate.Router, lineages *delegate.Lineages, cardURL, instance string) *tasks.Engine {
	sup := s.sup
	cfg := a2abind.ExecutorConfig{
		Router:       router,
		CancelHandle: sup.Cancel,
		Limits:       c.Core.limits(),
		Intelligence: c.Core.intelligenceSpec(),
		Scope:        s.tools.rootScope,
		PublicURL:    cardURL,
		Instance:     instance,
		MaxDepth:     func() int { return sup.Caps().MaxDepth },
		Lineages:     lineages,
		MaxFrame:     api.FrameLimit(s.budgets.maxMessage), // the supervisor's: a follow-up the next turn cannot carry is refused
		InputTimeout: c.Mesh.InputTimeout,
		Log:          s.log,
	}
	if s.agents != nil {
		cfg.AgentType = s.agents.typeFor
	}
	exec := a2abind.NewExecutor(cfg)
	pushAllow, _ := c.Mesh.pushAllow() // checked by Validate
	journal, _ := store.(tasks.PushJournal)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: pushAllow}, Log: s.log, Journal: journal}, store.ListPush)
	s.closers.add(pusher.Close)
	// The large parts of a finished task go to the blob store, under the
	// caller's blob quota.
	offload := a2abind.BlobOffloader{PublicURL: cardURL, Store: func(owner, caller, mediaType string, content []byte) (string, error) {
		b, err := sup.StoreBlob(owner, caller, mediaType, content)
		return b.ID, err
	}}
	opts := []tasks.EngineOption{tasks.WithSendWait(c.Mesh.SendWait), tasks.WithPusher(pusher), tasks.WithOrphanFilter(isRunRecord),
		tasks.WithAdmission(s.admission.ctrl, s.admission.policy), tasks.WithOffload(offload, tasks.DefaultOffloadAbove), tasks.WithStoreWait(c.Store.Wait)}
	if s.recover == tasks.RecoverRerun {
		opts = append(opts, tasks.WithEagerRetain()) // a task lost right after its start runs again
	}
	return tasks.NewEngine(store, exec, s.log, opts...)
}

// takeOver resolves, every half lease until ctx ends, the tasks of the
// replicas whose lease has expired (the first replica to claim each wins).
func (s *service) takeOver(ctx context.Context) {
	t := time.NewTicker(s.lease)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.engine.Recover(ctx, s.recover); err != nil && ctx.Err() == nil {
			s.log.Warn("the tasks of expired replicas not resolved: retrying", "err", err)
		}
	}
}

// isRunRecord reports whether t is the record of an `agentd run --run-id`
// in a state directory this service shares: that command resolves its own.
func isRunRecord(t *a2a.Task) bool {
	id, ok := strings.CutPrefix(string(t.ID), "run-")
	return ok && t.Metadata[api.MetaRunID] == id
}
