package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

// grpcTLS is the TLS config of a gRPC client of the auth fixture presenting
// svid (none when nil).
func (f *authFixture) grpcTLS(svid *x509svid.SVID) *tls.Config {
	var src x509svid.Source
	if svid != nil {
		src = svid
	}
	return tlsconfig.ClientConfig(src, f.bundle, spiffetls.AuthorizeID(serverID))
}

// grpcClient is a2agrpc's client of the fixture's listener.
func (f *authFixture) grpcClient(t *testing.T, o a2agrpc.Options) *a2agrpc.Client {
	t.Helper()
	c, err := a2agrpc.New(f.url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func hello(id string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: &a2a.Message{ID: id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}}
}

func grpcCode(err error) codes.Code {
	var e *a2agrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return status.Code(err)
}

// TestGRPCIdentityAndAuthorization: the gRPC binding on the TLS listener
// (ALPN h2) knows the caller as JSON-RPC does: the SPIFFE ID of the mTLS
// client certificate, or the bearer token in the authorization metadata. A
// task made over gRPC belongs to its caller on both bindings; another caller
// gets NOT_FOUND; callers without credentials, with a bad token or with an
// identity the policy refuses get UNAUTHENTICATED or PERMISSION_DENIED
// before any method runs.
func TestGRPCIdentityAndAuthorization(t *testing.T) {
	f := newAuthFixture(t)
	ctx := context.Background()
	peer := f.grpcClient(t, a2agrpc.Options{TLS: f.grpcTLS(f.svid(t, peerID, tlsconfig.SVIDOptions{}))})
	res, err := peer.SendMessage(ctx, hello("g1"))
	if err != nil {
		t.Fatalf("SendMessage over mTLS: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("SendMessage answered %#v", res)
	}
	if text := task.Artifacts[0].Parts[0].(a2a.TextPart).Text; !strings.Contains(text, "echo: hello") {
		t.Fatalf("artifact %q", text)
	}
	if _, err := peer.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
		t.Fatalf("GetTask by its creator: %v", err)
	}
	// The same caller over JSON-RPC sees it; the recorded caller is the SVID.
	r, err := do(t, f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{})), f.url, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"`+string(task.ID)+`"}}`, nil)
	if err != nil || r.rpc.Error != nil {
		t.Fatalf("tasks/get of the gRPC task by the same SVID over JSON-RPC: %v %+v", err, r.rpc.Error)
	}
	// Another caller (a peer token) does not; an operator token does.
	other := f.grpcClient(t, a2agrpc.Options{TLS: f.grpcTLS(nil), Token: func() (string, error) { return peerToken, nil }})
	if _, err := other.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) || grpcCode(err) != codes.NotFound {
		t.Fatalf("GetTask by another caller: %v, want NOT_FOUND (ErrTaskNotFound)", err)
	}
	op := f.grpcClient(t, a2agrpc.Options{TLS: f.grpcTLS(nil), Token: func() (string, error) { return operatorToken, nil }})
	if _, err := op.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
		t.Fatalf("GetTask by an operator token: %v", err)
	}
	if res, err := other.SendMessage(ctx, hello("g2")); err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage with a bearer token: %v %v", res, err)
	}
	for _, c := range []struct {
		name string
		opts a2agrpc.Options
		want codes.Code
	}{
		{"no credentials", a2agrpc.Options{TLS: f.grpcTLS(nil)}, codes.Unauthenticated},
		{"bad token", a2agrpc.Options{TLS: f.grpcTLS(nil), Token: func() (string, error) { return "nope-0123456789", nil }}, codes.Unauthenticated},
		{"refused SVID", a2agrpc.Options{TLS: f.grpcTLS(f.svid(t, strangerID, tlsconfig.SVIDOptions{}))}, codes.PermissionDenied},
	} {
		_, err := f.grpcClient(t, c.opts).SendMessage(ctx, hello("g-"+c.name))
		if grpcCode(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
}

// grpcFront serves h on a plaintext loopback listener with the protocols of
// the development mode (PlainProtocols: HTTP/1.1 and h2c), as serve does
// without TLS, and returns its address.
func grpcFront(t *testing.T, cfg Config) string {
	t.Helper()
	addr, _, _ := splitFront(t, cfg, ConnLimits{}, nil)
	return addr
}

// rawConn is a grpc-go connection to addr over h2c, for raw calls.
func rawConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// rawCodec sends and receives the bytes it is given, as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// reasonOf is the reason of err's A2A ErrorInfo.
func reasonOf(err error) string {
	var e *a2agrpc.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestGRPCBadInput: requests the binding refuses get a clear status and
// change nothing: a body that is not protobuf (INVALID_ARGUMENT, not the
// INTERNAL the gRPC runtime would answer), a gRPC message over the body limit
// (RESOURCE_EXHAUSTED) and a message over the message size limit
// (INVALID_ARGUMENT naming it), a message without what 1.0 requires, an
// unknown method or service (UNIMPLEMENTED), another A2A version
// (UNIMPLEMENTED, VERSION_NOT_SUPPORTED).
func TestGRPCBadInput(t *testing.T) {
	store := tasks.NewMemoryStore(100, time.Hour)
	engine := tasks.NewEngine(store, echoExecutor(t), nil)
	addr := grpcFront(t, Config{Handler: engine, MaxMessage: 2000, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	conn := rawConn(t, addr)
	ctx := context.Background()
	raw := func(method string, body []byte) error {
		var out []byte
		return conn.Invoke(ctx, "/lf.a2a.v1.A2AService/"+method, &body, &out, grpc.ForceCodecV2(rawCodec{}))
	}
	c, err := a2agrpc.New("http://"+addr+"/", a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	err = raw("SendMessage", []byte{0x12, 0xff, 0xff, 0xff})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not a valid protobuf lf.a2a.v1.SendMessageRequest") {
		t.Errorf("malformed protobuf: %v, want INVALID_ARGUMENT naming the request", err)
	}
	big, _ := proto.Marshal(&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "big", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: strings.Repeat("x", int(BodyLimit(2000))+1)}}}}})
	if err := raw("SendMessage", big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a gRPC message over the body limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	long := hello("long")
	long.Message.Parts = a2a.ContentParts{a2a.TextPart{Text: strings.Repeat("<", 1000)}} // 6000 bytes encoded
	if _, err := c.SendMessage(ctx, long); grpcCode(err) != codes.InvalidArgument || !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "message size limit of 2000 bytes") {
		t.Errorf("a message over the message size limit: %v, want INVALID_ARGUMENT naming the limit", err)
	}
	if _, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleUser}}); grpcCode(err) != codes.InvalidArgument || reasonOf(err) != "INVALID_PARAMS" {
		t.Errorf("a message without parts: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "nope"}); grpcCode(err) != codes.NotFound || reasonOf(err) != "TASK_NOT_FOUND" {
		t.Errorf("an unknown task: %v, want NOT_FOUND with reason TASK_NOT_FOUND", err)
	}
	if err := raw("Nope", nil); status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown method: %v, want UNIMPLEMENTED", err)
	}
	var out []byte
	if err := conn.Invoke(ctx, "/a2a.v1.A2AService/SendMessage", &[]byte{}, &out, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown service: %v, want UNIMPLEMENTED", err)
	}
	stub := a2apb.NewA2AServiceClient(conn)
	v03 := metadata.AppendToOutgoingContext(ctx, "a2a-version", "0.3")
	_, err = stub.GetTask(v03, &a2apb.GetTaskRequest{Id: "x"})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "A2A-Version 0.3") {
		t.Errorf("A2A-Version 0.3: %v, want UNIMPLEMENTED", err)
	}
	if reasonOf(a2aErr(err)) != "VERSION_NOT_SUPPORTED" {
		t.Errorf("A2A-Version 0.3: reason %q", reasonOf(a2aErr(err)))
	}
	// Nothing was stored.
	page, err := engine.ListTasks(tasks.WithVersion(ctx, "1.0"), tasks.ListQuery{})
	if err != nil || page.TotalSize != 0 {
		t.Fatalf("tasks after bad input: %d %v, want none", page.TotalSize, err)
	}
}

// a2aErr reads a raw stub's status as the client does.
func a2aErr(err error) error { return a2agrpc.StatusError("GetTask", err) }

// echoExecutor is a2abind's executor with echoProvider as its local provider.
func echoExecutor(t *testing.T) a2asrv.AgentExecutor {
	t.Helper()
	router := &delegate.Router{}
	if err := router.Register(echoProvider{}); err != nil {
		t.Fatal(err)
	}
	return a2abind.NewExecutor(a2abind.ExecutorConfig{Router: router, Limits: api.Limits{MaxSteps: 1, MaxTokens: 100, Deadline: api.Duration(time.Minute), MaxChildren: 1}})
}

// TestGRPCStreamsAndShedding: SendStreamingMessage and SubscribeToTask
// stream the task's events over h2c on loopback; SubscribeToTask on an ended
// task is UNIMPLEMENTED (UnsupportedOperationError); past the admission
// queue, SendMessage and SendStreamingMessage are RESOURCE_EXHAUSTED with a
// RetryInfo of the admission's delay, and no stream starts; a client that
// abandons a stream mid-way leaves no goroutine behind (TestMain's leak
// check) and the task runs on, cancelable.
func TestGRPCStreamsAndShedding(t *testing.T) {
	ctrl, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1}, RunEstimate: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil, tasks.WithAdmission(ctrl, admit.Policy{}))
	addr := grpcFront(t, Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// A stream abandoned after its first events: the task works on.
	var taskID a2a.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, hello("s1")) {
		if err != nil {
			t.Fatalf("SendStreamingMessage: %v", err)
		}
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && u.Status.State == a2a.TaskStateWorking {
			taskID = u.TaskID
			break
		}
		if task, ok := ev.(*a2a.Task); ok {
			taskID = task.ID
		}
	}
	if taskID == "" {
		t.Fatal("no task in the stream")
	}
	// Another subscriber sees it working, and abandons it too.
	for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: taskID}) {
		if err != nil {
			t.Fatalf("SubscribeToTask: %v", err)
		}
		_ = ev
		break
	}
	// Shed: one run is all the admission takes.
	_, err = c.SendMessage(ctx, hello("s2"))
	var ge *a2agrpc.Error
	if !errors.As(err, &ge) || ge.Code != codes.ResourceExhausted || ge.RetryAfter != 7*time.Second || ge.Reason != "RESOURCE_EXHAUSTED" || !errors.Is(err, a2a.ErrServerError) {
		t.Fatalf("SendMessage past the queue: %v (%+v), want RESOURCE_EXHAUSTED with RetryInfo 7s", err, ge)
	}
	n := 0
	for _, err := range c.SendStreamingMessage(ctx, hello("s3")) {
		n++
		if grpcCode(err) != codes.ResourceExhausted {
			t.Fatalf("SendStreamingMessage past the queue: %v, want RESOURCE_EXHAUSTED", err)
		}
	}
	if n != 1 {
		t.Fatalf("a shed stream yielded %d items, want its one error", n)
	}
	// The abandoned task is still there, and cancels; then subscribing to it
	// is refused.
	task, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: taskID})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %v %v", task, err)
	}
	for _, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: taskID}) {
		if grpcCode(err) != codes.Unimplemented || !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Fatalf("SubscribeToTask of a canceled task: %v, want UNIMPLEMENTED (UnsupportedOperation)", err)
		}
	}
	if !testkit.Poll(5*time.Second, func() bool { return engine.InFlight() == 0 }) {
		t.Fatalf("%d tasks live after the cancel", engine.InFlight())
	}
}

// TestGRPCCompletedStream: a stream runs to its end, the last event the
// completed status; the push-config calls round-trip over the binding.
func TestGRPCCompletedStream(t *testing.T) {
	addr := grpcFront(t, v1Config(t, echoExecutor(t), time.Minute))
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var last a2a.Event
	var text string
	for ev, err := range c.SendStreamingMessage(ctx, hello("c1")) {
		if err != nil {
			t.Fatalf("SendStreamingMessage: %v", err)
		}
		if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			text = a.Artifact.Parts[0].(a2a.TextPart).Text
		}
		last = ev
	}
	u, ok := last.(*a2a.TaskStatusUpdateEvent)
	if !ok || u.Status.State != a2a.TaskStateCompleted || !u.Final || !strings.Contains(text, "echo: hello") {
		t.Fatalf("last event %#v, artifact %q", last, text)
	}
	cfg := &a2a.TaskPushConfig{TaskID: u.TaskID, Config: a2a.PushConfig{ID: "p1", URL: "http://127.0.0.1:9/hook", Token: "tok"}}
	if got, err := c.SetTaskPushConfig(ctx, cfg); err != nil || got.Config.URL != cfg.Config.URL {
		t.Fatalf("SetTaskPushConfig: %+v %v", got, err)
	}
	if got, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: u.TaskID, ConfigID: "p1"}); err != nil || got.Config.Token != "tok" {
		t.Fatalf("GetTaskPushConfig: %+v %v", got, err)
	}
	if list, err := c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: u.TaskID}); err != nil || len(list) != 1 {
		t.Fatalf("ListTaskPushConfig: %+v %v", list, err)
	}
	if err := c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: u.TaskID, ConfigID: "p1"}); err != nil {
		t.Fatalf("DeleteTaskPushConfig: %v", err)
	}
	if _, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: u.TaskID, ConfigID: "p1"}); err == nil {
		t.Fatal("GetTaskPushConfig after the delete: no error")
	}
}

// TestH2COnlyOnLoopback: a plaintext listener speaks HTTP/2 without TLS (and
// so gRPC) only on a loopback address; elsewhere it is HTTP/1.1 alone, and
// a gRPC call over h2c fails.
func TestH2COnlyOnLoopback(t *testing.T) {
	for _, c := range []struct {
		addr string
		h2c  bool
	}{
		{"127.0.0.1:80", true}, {"[::1]:80", true}, {"10.1.2.3:80", false}, {"[2001:db8::1]:80", false}, {"0.0.0.0:80", false},
	} {
		a, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		p := PlainProtocols(a)
		if p.UnencryptedHTTP2() != c.h2c || !p.HTTP1() || p.HTTP2() {
			t.Errorf("%s: %v, want h2c %v", c.addr, p, c.h2c)
		}
	}
	// A server with the protocols of a non-loopback address, reached on
	// loopback: the gRPC call over h2c does not get through.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, _ := net.ResolveTCPAddr("tcp", "10.1.2.3:80")
	srv := &http.Server{Handler: v1Handler(t, echoExecutor(t), time.Minute), Protocols: PlainProtocols(elsewhere), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	defer srv.Close()
	c, err := a2agrpc.New(ln.Addr().String(), a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.SendMessage(ctx, hello("h1")); err == nil || grpcCode(err) == codes.OK {
		t.Fatal("gRPC over h2c reached a server whose protocols are a non-loopback address's")
	}
}

// TestGRPCDeadline: the call's deadline (grpc-timeout) bounds a blocking
// SendMessage: the caller gets DEADLINE_EXCEEDED when it passes, and the
// task, which outlives its send as over JSON-RPC, is still there to cancel.
func TestGRPCDeadline(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil)
	addr := grpcFront(t, Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.SendMessage(ctx, hello("d1")); grpcCode(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a blocking send past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	var id string
	if !testkit.Poll(5*time.Second, func() bool {
		page, err := engine.ListTasks(tasks.WithVersion(context.Background(), "1.0"), tasks.ListQuery{})
		if err == nil && len(page.Tasks) == 1 {
			id = string(page.Tasks[0].ID)
		}
		return id != ""
	}) {
		t.Fatal("the task of the send is not listed")
	}
	if task, err := c.CancelTask(context.Background(), &a2a.TaskIDParams{ID: a2a.TaskID(id)}); err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %v %v", task, err)
	}
	if !testkit.Poll(5*time.Second, func() bool { return engine.InFlight() == 0 }) {
		t.Fatalf("%d tasks live after the cancel", engine.InFlight())
	}
}

// TestGRPCVersionAllocs: checking a call's a2a-version reads that one key;
// its cost does not grow with the rest of the call's metadata (it copied
// every key and value before).
func TestGRPCVersionAllocs(t *testing.T) {
	allocs := func(n int) float64 {
		md := metadata.Pairs("a2a-version", "1.0")
		for i := range n {
			md.Append(fmt.Sprintf("x-key-%d", i), "value")
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)
		return testing.AllocsPerRun(100, func() {
			if _, err := grpcVersion(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	if few, many := allocs(0), allocs(16); many > few {
		t.Fatalf("grpcVersion: %v allocations with 16 more metadata keys, %v without: want no more", many, few)
	}
}
