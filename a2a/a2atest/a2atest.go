// Package a2atest holds the test helpers of the A2A packages (tasks, a2abind,
// peer, and the e2e tests' plain peer): messages, a bounded blocking send,
// polling until a task ends, a fake delegation provider, and a plain a2a-go
// executor served on loopback. It is for tests only; the helpers every
// package shares (polling for a condition, buffers, processes) are in
// internal/testkit.
package a2atest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor/delegate"
)

// Wait bounds every wait of this package.
const Wait = 5 * time.Second

// Msg returns send params for a user message with one text part.
func Msg(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

// NonBlocking returns Msg(text) configured not to block.
func NonBlocking(text string) *a2a.MessageSendParams {
	p := Msg(text)
	f := false
	p.Config = &a2a.MessageSendConfig{Blocking: &f}
	return p
}

// Send sends p through h within Wait and returns the task it answers with.
func Send(t testing.TB, h a2asrv.RequestHandler, p *a2a.MessageSendParams) *a2a.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	res, err := h.OnSendMessage(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return res.(*a2a.Task)
}

// WaitTerminal polls tasks/get until the task is terminal and returns it.
func WaitTerminal(t testing.TB, h a2asrv.RequestHandler, id a2a.TaskID) *a2a.Task {
	t.Helper()
	var got *a2a.Task
	testkit.WaitFor(t, Wait, "task "+string(id)+" terminal", func() bool {
		task, err := h.OnGetTask(context.Background(), &a2a.TaskQueryParams{ID: id})
		got = task
		return err == nil && task.Status.State.Terminal()
	})
	return got
}

// ArtifactText is the text of every text part of the task's artifacts, one
// per line.
func ArtifactText(t *a2a.Task) string {
	out := ""
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				if out != "" {
					out += "\n"
				}
				out += tp.Text
			}
		}
	}
	return out
}

// Provider is a fake delegate.Provider: it records every request and answers
// each with Result(req) on a goroutine of its own; Hold, if set, keeps every
// run going until it closes (a Cancel ends the run cancelled, its reason the
// detail); OnRun, if set, runs first. Set its fields before its first Start;
// it is then safe for concurrent use.
type Provider struct {
	ProviderName string // "" is delegate.LocalName
	Caps         delegate.Capabilities
	Result       func(delegate.Request) api.SubagentResult
	Hold         chan struct{}
	OnRun        func(delegate.Request)

	mu   sync.Mutex // guards reqs
	reqs []delegate.Request
}

// FullCaps are every start-time capability.
var FullCaps = delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}

// Name implements delegate.Provider.
func (f *Provider) Name() string {
	if f.ProviderName == "" {
		return delegate.LocalName
	}
	return f.ProviderName
}

// Capabilities implements delegate.Provider.
func (f *Provider) Capabilities() delegate.Capabilities { return f.Caps }

// InheritsParentContext implements delegate.Provider.
func (f *Provider) InheritsParentContext() bool { return false }

// Requests returns the requests started so far.
func (f *Provider) Requests() []delegate.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs
}

// Reset forgets the requests recorded so far.
func (f *Provider) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = f.reqs[:0]
}

// Start implements delegate.Provider.
func (f *Provider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	r := &run{done: make(chan struct{}), cancel: make(chan string, 1)}
	go func() {
		defer close(r.done)
		if f.OnRun != nil {
			f.OnRun(req)
		}
		if f.Hold != nil {
			select {
			case <-f.Hold:
			case reason := <-r.cancel:
				r.res = api.SubagentResult{Status: api.StatusCancelled, Detail: reason}
				return
			}
		}
		r.res = f.Result(req)
	}()
	return r, nil
}

type run struct {
	done   chan struct{}
	cancel chan string
	res    api.SubagentResult
}

func (r *run) ID() string                 { return "run" }
func (r *run) Done() <-chan struct{}      { return r.done }
func (r *run) Result() api.SubagentResult { <-r.done; return r.res }
func (r *run) Cancel(reason string) {
	select {
	case r.cancel <- reason:
	default:
	}
}

// Echo completes with "answer: " and the objective, and some usage.
func Echo(req delegate.Request) api.SubagentResult {
	return api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("answer: " + req.Payload.Contract.Objective), Usage: api.Usage{TokensIn: 3, TokensOut: 4, Steps: 1}}
}
