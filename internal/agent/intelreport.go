package agent

import "github.com/agentd/agentd/api"

// reportIntelligence tells the supervisor of a model call's outcome, a
// failover or a breaker change (api.MethodIntelligence): the supervisor
// counts them and hands the breakers' state to the children it spawns next.
// A report that cannot be sent is logged and lost; the call goes on.
func (c *control) reportIntelligence(r api.IntelligenceReport) {
	if err := c.w.Send(api.MethodIntelligence, 0, r); err != nil {
		c.log.Warn("intelligence/report failed", "err", err)
	}
}

// reporterSetter is a model that reports on its endpoints (a failover
// intelligence): Serve gives it reportIntelligence.
type reporterSetter interface {
	SetReporter(func(api.IntelligenceReport))
}
