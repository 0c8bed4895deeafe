package tasks_test

import (
	"testing"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
)

// The memory store passes the conformance suite every store passes.
func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, cfg storetest.Config) tasks.Store {
			s := tasks.NewMemoryStoreLimits(tasks.MemoryLimits{Capacity: cfg.Capacity, Retention: cfg.Retention, QuotaTasks: cfg.QuotaTasks, AuditKeep: cfg.AuditKeep, AuditMaxAge: cfg.AuditMaxAge})
			if cfg.Clock != nil {
				tasks.SetMemoryClock(s, cfg.Clock)
			}
			return s
		},
	})
}
