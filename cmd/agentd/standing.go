package main

import (
	"context"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/supervisor/trigger"
)

// openStanding builds the service's standing trigger of --mode: its runner
// makes each run an A2A task of the engine. once and workflow start one task;
// loop, schedule and reactive run their trigger, whose breakers wait for an
// operator (a2a.CloseBreaker).
func (s *service) openStanding(c *serveConfig, lineages *delegate.Lineages, cardURL, instance string) error {
	m := c.Modes.mode()
	if m == "" {
		return nil
	}
	root, err := buildRoot(c.Instruction, "", &c.Core, &c.Modes, s.tools)
	if err != nil {
		return err
	}
	sup := s.sup
	runner := &taskRunner{engine: s.engine, sup: sup, root: root, publicURL: cardURL, instance: instance,
		lineages: lineages, maxDepth: func() int { return sup.Caps().MaxDepth }, log: s.log, admission: s.admission.ctrl}
	s.serving = append(s.serving, "mode", string(m))
	if m.SessionBacking() {
		s.standing = c.Modes.triggerFor(trigger.Options{Runner: runner, Governor: sup.Governor(), Logger: s.log}, s.tools, c.Core.MCP.MaxResult, s.stateDir)
		return nil
	}
	s.standing = func(ctx context.Context) (api.SubagentResult, error) {
		r, err := runner.Start(ctx, trigger.Event{Mode: m, Session: "trigger:" + string(m), Seq: 1, Attempt: 1})
		if err != nil {
			return api.SubagentResult{}, err
		}
		select {
		case <-r.Done():
		case <-ctx.Done():
			r.Cancel("the service drains")
			<-r.Done()
		}
		return r.Result(), nil
	}
	return nil
}
