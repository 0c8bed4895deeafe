package a2atest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
)

// Executor is a stock a2a-go AgentExecutor, the plain A2A peer a test talks
// to: it answers a message with an artifact "echo: " and the message's text,
// and completes; with Block set it works until cancelled. It records the
// messages it got, and Canceled closes at its first cancel. Set Block before
// its first use; it is then safe for concurrent use. The zero value echoes.
type Executor struct {
	Block bool

	mu       sync.Mutex // guards msgs, canceled, closed
	msgs     []*a2a.Message
	canceled chan struct{}
	closed   bool
}

// Messages returns the messages executed so far.
func (e *Executor) Messages() []*a2a.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*a2a.Message(nil), e.msgs...)
}

// Canceled returns a channel closed at the first cancel.
func (e *Executor) Canceled() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.canceledLocked()
}

func (e *Executor) canceledLocked() chan struct{} {
	if e.canceled == nil {
		e.canceled = make(chan struct{})
	}
	return e.canceled
}

// Execute implements a2asrv.AgentExecutor.
func (e *Executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.mu.Lock()
	e.msgs = append(e.msgs, reqCtx.Message)
	e.mu.Unlock()
	if reqCtx.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(reqCtx, reqCtx.Message)); err != nil {
			return err
		}
	}
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	if e.Block {
		<-ctx.Done()
		return nil
	}
	text := ""
	for _, part := range reqCtx.Message.Parts {
		if tp, ok := part.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	if err := q.Write(ctx, a2a.NewArtifactEvent(reqCtx, a2a.TextPart{Text: "echo: " + text})); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// Cancel implements a2asrv.AgentExecutor: the task ends canceled.
func (e *Executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.mu.Lock()
	if !e.closed {
		close(e.canceledLocked())
		e.closed = true
	}
	e.mu.Unlock()
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// Card is the agent card of a plain A2A 0.3 agent served over JSON-RPC at
// url: streaming, text in and out, one "echo" skill, no extension.
func Card(url string) *a2a.AgentCard {
	return &a2a.AgentCard{Name: "plain", URL: url, PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0",
		Capabilities: a2a.AgentCapabilities{Streaming: true}, DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "echo", Name: "echo", Description: "echoes", Tags: []string{"echo"}}}}
}

// Serve serves handler over JSON-RPC, and card(its URL + "/") at the
// well-known card path, on a loopback httptest server closed at cleanup, and
// returns the server's URL. wrap, if set, wraps the whole server (to check
// or refuse requests).
func Serve(t testing.TB, handler a2asrv.RequestHandler, card func(url string) *a2a.AgentCard, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	var h http.Handler = mux
	if wrap != nil {
		h = wrap(mux)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	mux.Handle("/", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card(srv.URL+"/")))
	return srv.URL
}
