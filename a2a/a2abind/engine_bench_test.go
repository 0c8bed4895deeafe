package a2abind

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/delegate"
)

// BenchmarkEngineSend is one blocking message/send through the engine, the
// executor and the delegation router, to a provider that completes at once:
// agentd's A2A path without HTTP.
func BenchmarkEngineSend(b *testing.B) {
	p := &a2atest.Provider{Result: a2atest.Echo, Caps: a2atest.FullCaps}
	router := &delegate.Router{}
	if err := router.Register(p); err != nil {
		b.Fatal(err)
	}
	exec := NewExecutor(ExecutorConfig{
		Router: router, Limits: testGrant, Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
		Instance: "self", MaxDepth: func() int { return 4 }, Lineages: &delegate.Lineages{},
	})
	e := tasks.NewEngine(tasks.NewMemoryStore(1000, time.Hour), exec, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p.Reset() // the fake keeps every request; not part of the path
		res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hello"})})
		if err != nil {
			b.Fatal(err)
		}
		if t := res.(*a2a.Task); t.Status.State != a2a.TaskStateCompleted {
			b.Fatalf("state %s", t.Status.State)
		}
	}
}
