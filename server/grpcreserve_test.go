package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
)

// gate is a Config.ReserveMessage that records what is asked of it, gives
// every reservation back through released, and sheds (reason memory) while
// shed is set.
type gate struct {
	mu       sync.Mutex
	asked    []int64
	shed     atomic.Bool
	released atomic.Int64
}

func (g *gate) reserve(n int64) (func(), error) {
	g.mu.Lock()
	g.asked = append(g.asked, n)
	g.mu.Unlock()
	if g.shed.Load() {
		return nil, &admit.ShedError{Reason: admit.ReasonMemory, RetryAfter: 3 * time.Second}
	}
	var once sync.Once
	return func() { once.Do(func() { g.released.Add(1) }) }, nil
}

func (g *gate) calls() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int64(nil), g.asked...)
}

// bigText is a message of n bytes of text.
func bigText(id string, n int) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: &a2a.Message{ID: id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: strings.Repeat("x", n)}}}}
}

// TestGRPCReservesMessage: a gRPC request message of 64 KiB or more is
// reserved for from the memory gate before it is decoded, as a JSON-RPC
// body is before it is read; the reservation is given back when the call
// ends; one the gate sheds is answered RESOURCE_EXHAUSTED with its retry
// hint and reason memory, and creates no task, for a unary call and a
// stream alike. A small message reserves nothing.
func TestGRPCReservesMessage(t *testing.T) {
	g := &gate{}
	store := tasks.NewMemoryStore(100, time.Hour)
	engine := tasks.NewEngine(store, echoExecutor(t), nil)
	addr := grpcFront(t, Config{Handler: engine, ReserveMessage: g.reserve, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	if _, err := c.SendMessage(ctx, hello("small")); err != nil {
		t.Fatal(err)
	}
	if n := len(g.calls()); n != 0 {
		t.Fatalf("a small message made %d reservations", n)
	}
	if _, err := c.SendMessage(ctx, bigText("big", 100<<10)); err != nil {
		t.Fatal(err)
	}
	if asked := g.calls(); len(asked) != 1 || asked[0] < 100<<10 {
		t.Fatalf("reservations %v, want one of the message's 100 KiB or more", asked)
	}
	testkit.WaitFor(t, 5*time.Second, "the unary call's reservation given back", func() bool { return g.released.Load() == 1 })
	for _, err := range c.SendStreamingMessage(ctx, bigText("big-stream", 100<<10)) {
		if err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the stream's reservation given back", func() bool { return g.released.Load() == 2 })

	before := store.Len()
	g.shed.Store(true)
	_, err = c.SendMessage(ctx, bigText("shed", 100<<10))
	var ge *a2agrpc.Error
	if !errors.As(err, &ge) || ge.Code != codes.ResourceExhausted || ge.RetryAfter != 3*time.Second || !strings.Contains(err.Error(), admit.ReasonMemory) {
		t.Fatalf("SendMessage shed for memory: %v (%+v), want RESOURCE_EXHAUSTED, retry after 3s, reason memory", err, ge)
	}
	n := 0
	for _, err := range c.SendStreamingMessage(ctx, bigText("shed-stream", 100<<10)) {
		n++
		if grpcCode(err) != codes.ResourceExhausted {
			t.Fatalf("SendStreamingMessage shed for memory: %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	if n != 1 {
		t.Fatalf("a shed stream yielded %d items, want its one error", n)
	}
	if after := store.Len(); after != before {
		t.Fatalf("%d tasks after the sheds, %d before: a shed message made a task", after, before)
	}
	if r := g.released.Load(); r != 2 {
		t.Fatalf("%d reservations given back, want the 2 admitted", r)
	}
}

// TestGRPCUnaryReservesMessage: the same on a unary call served on its
// HTTP/2 request (grpcunary.go).
func TestGRPCUnaryReservesMessage(t *testing.T) {
	g := &gate{}
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	h := Handler(Config{Handler: engine, ReserveMessage: g.reserve, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	body, err := proto.Marshal(&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "big", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: strings.Repeat("x", 100<<10)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	send := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, grpcRequest("SendMessage", grpcFrame(body)))
		return rec
	}
	if rec := send(); rec.Result().Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("an admitted message: status %q %q", rec.Result().Trailer.Get("Grpc-Status"), rec.Header().Get("Grpc-Message"))
	}
	if asked := g.calls(); len(asked) != 1 || asked[0] < 100<<10 || g.released.Load() != 1 {
		t.Fatalf("reservations %v, %d given back; want one of 100 KiB or more, given back", asked, g.released.Load())
	}
	g.shed.Store(true)
	rec := send()
	if st := rec.Header().Get("Grpc-Status"); st != "8" || !strings.Contains(rec.Header().Get("Grpc-Message"), admit.ReasonMemory) {
		t.Fatalf("a shed message: status %q %q, want 8 (RESOURCE_EXHAUSTED), reason memory", st, rec.Header().Get("Grpc-Message"))
	}
}

// TestGRPCReservationOfARefusedCall: a big message from a caller the front
// refuses (no credentials) was reserved for before it was decoded; its
// reservation is given back though the call never reached a method.
func TestGRPCReservationOfARefusedCall(t *testing.T) {
	g := &gate{}
	tokens, err := ParseTokens([]byte("tok-ok-0123456789abcdef peer ci\n"))
	if err != nil {
		t.Fatal(err)
	}
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), echoExecutor(t), nil)
	addr := grpcFront(t, Config{Handler: engine, ReserveMessage: g.reserve, Auth: &Auth{Tokens: tokens},
		Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SendMessage(context.Background(), bigText("refused", 100<<10)); grpcCode(err) != codes.Unauthenticated {
		t.Fatalf("SendMessage without credentials: %v, want UNAUTHENTICATED", err)
	}
	if asked := g.calls(); len(asked) != 1 {
		t.Fatalf("reservations %v, want the one made before decoding", asked)
	}
	testkit.WaitFor(t, 5*time.Second, "the refused call's reservation given back", func() bool { return g.released.Load() == 1 })
}
