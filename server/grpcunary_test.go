package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/tasks"
)

// grpcFrame is msg as a gRPC message: the uncompressed flag, its length,
// its bytes.
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// grpcRequest is an HTTP/2 gRPC call of method with body, as net/http's
// server hands it to a handler.
func grpcRequest(method string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/lf.a2a.v1.A2AService/"+method, bytes.NewReader(body))
	r.ProtoMajor, r.ProtoMinor, r.Proto = 2, 0, "HTTP/2.0"
	r.Header.Set("Content-Type", "application/grpc")
	r.Header.Set("Te", "trailers")
	return r
}

// sendRequest is a SendMessage request of one text message.
func sendRequest(t *testing.T, id string) []byte {
	t.Helper()
	b, err := proto.Marshal(&a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: id, Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGRPCUnaryInOneWrite: a unary call is answered on the request's own
// goroutine, its message and its status (in the trailers) written when the
// handler returns, without a flush per frame (grpc.Server.ServeHTTP flushes
// after the headers, the message and the status, each handed to the
// request's goroutine over a channel: the cost figure 2 measured). The
// metadata reaches the interceptors: the A2A-Version is read from it.
func TestGRPCUnaryInOneWrite(t *testing.T) {
	h := testHandler(0)
	r := grpcRequest("SendMessage", grpcFrame(sendRequest(t, "one-write")))
	r.Header.Set("A2A-Version", "1.0")
	r.Header.Set("X-Trace-Bin", "AQID") // binary metadata, base64: decodes
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	res := rec.Result()
	if rec.Flushed {
		t.Error("the unary answer was flushed before the handler returned")
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/grpc" {
		t.Errorf("Content-Type %q", ct)
	}
	if s := res.Trailer.Get("Grpc-Status"); s != "0" {
		t.Fatalf("Grpc-Status trailer %q (headers %v), want 0", s, res.Header)
	}
	body, _ := io.ReadAll(res.Body)
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		t.Fatalf("the answer is not one gRPC message: % x", body)
	}
	var out a2apb.SendMessageResponse
	if err := proto.Unmarshal(body[5:], &out); err != nil || out.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("SendMessage: %v %v", &out, err)
	}

	// Another version in the metadata is refused, trailers-only.
	r = grpcRequest("SendMessage", grpcFrame(sendRequest(t, "v03")))
	r.Header.Set("A2A-Version", "0.3")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if s := rec.Header().Get("Grpc-Status"); s != strconv.Itoa(int(codes.Unimplemented)) || rec.Header().Get("Grpc-Status-Details-Bin") == "" {
		t.Fatalf("A2A-Version 0.3: Grpc-Status %q, headers %v; want UNIMPLEMENTED with its ErrorInfo", s, rec.Header())
	}
}

// TestGRPCUnaryBadCalls: a unary call whose framing, deadline or metadata is
// broken is answered with a status (trailers-only), as grpc's transport
// answers it, and reaches no method: nothing is stored.
func TestGRPCUnaryBadCalls(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	h := Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}), MaxMessage: 2000})
	msg := sendRequest(t, "bad")
	compressed := grpcFrame(msg)
	compressed[0] = 1
	huge := make([]byte, 5)
	binary.BigEndian.PutUint32(huge[1:], uint32(BodyLimit(2000))+1)
	for _, c := range []struct {
		name   string
		body   []byte
		header [2]string
		want   codes.Code
	}{
		{"no message", nil, [2]string{}, codes.Internal},
		{"a cut prefix", []byte{0, 0}, [2]string{}, codes.Internal},
		{"a cut message", grpcFrame(msg)[:8], [2]string{}, codes.Internal},
		{"the compressed flag without an encoding", compressed, [2]string{}, codes.Internal},
		{"a message over the body limit", huge, [2]string{}, codes.ResourceExhausted},
		{"a malformed grpc-timeout", grpcFrame(msg), [2]string{"Grpc-Timeout", "5x"}, codes.Internal},
		{"malformed binary metadata", grpcFrame(msg), [2]string{"X-Trace-Bin", "!!"}, codes.Internal},
		{"not protobuf", grpcFrame([]byte{0xff, 0xff, 0xff}), [2]string{}, codes.InvalidArgument},
	} {
		r := grpcRequest("SendMessage", c.body)
		if c.header[0] != "" {
			r.Header.Set(c.header[0], c.header[1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if s := rec.Header().Get("Grpc-Status"); s != strconv.Itoa(int(c.want)) || rec.Header().Get("Grpc-Message") == "" || rec.Body.Len() != 0 {
			t.Errorf("%s: Grpc-Status %q (%q), %d body bytes; want %d and a message", c.name, s, rec.Header().Get("Grpc-Message"), rec.Body.Len(), c.want)
		}
	}
	page, err := engine.ListTasks(tasks.WithVersion(context.Background(), "1.0"), tasks.ListQuery{})
	if err != nil || len(page.Tasks) != 0 {
		t.Fatalf("tasks after the bad calls: %v %v", page, err)
	}
}

func TestGRPCTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"100m": 100 * time.Millisecond, "2S": 2 * time.Second, "3M": 3 * time.Minute, "1H": time.Hour,
		"7u": 7 * time.Microsecond, "9n": 9, "99999999H": math.MaxInt64} {
		if got, err := grpcTimeout(in); err != nil || got != want {
			t.Errorf("grpcTimeout(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5", "5x", "m", "123456789S", "-1S", "1.5S"} {
		if got, err := grpcTimeout(in); err == nil {
			t.Errorf("grpcTimeout(%q) = %v, want an error", in, got)
		}
	}
}

// TestGRPCUnaryBodyDeadline: the connection budgets' body deadline bounds a
// unary call's message: one that trickles in and stops is answered
// DEADLINE_EXCEEDED once the deadline passes, over a real HTTP/2 (h2c)
// connection, and the other calls on the connection go on.
func TestGRPCUnaryBodyDeadline(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ConnLimits{BodyTimeout: 50 * time.Millisecond}.Server(Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})}), nil)
	srv.Protocols = PlainProtocols(ln.Addr())
	srv.ErrorLog = log.New(io.Discard, "", 0)
	go srv.Serve(ln)
	defer srv.Close()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(grpcFrame(sendRequest(t, "trickle"))[:8]) }() // then nothing
	req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/lf.a2a.v1.A2AService/SendMessage", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if s := res.Header.Get("Grpc-Status"); res.ProtoMajor != 2 || s != strconv.Itoa(int(codes.DeadlineExceeded)) {
		t.Fatalf("a trickled message: HTTP/%d, Grpc-Status %q (%q), want DEADLINE_EXCEEDED", res.ProtoMajor, s, res.Header.Get("Grpc-Message"))
	}

	// The same connection serves a whole call.
	c, err := a2agrpc.New(ln.Addr().String(), a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if task, err := c.SendMessage(context.Background(), hello("whole")); err != nil || task == nil {
		t.Fatalf("SendMessage after the trickle: %v %v", task, err)
	}
}

// TestGRPCUnaryDrain: once the engine drains, a unary send is refused
// UNAVAILABLE, as JSON-RPC refuses it (-32603 server error), and a read
// still works.
func TestGRPCUnaryDrain(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	addr := grpcFront(t, Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res, err := c.SendMessage(ctx, hello("before"))
	if err != nil {
		t.Fatal(err)
	}
	engine.Drain()
	if _, err := c.SendMessage(ctx, hello("after")); grpcCode(err) != codes.Unavailable {
		t.Fatalf("SendMessage while draining: %v, want UNAVAILABLE", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage before the drain: %T, want a task", res)
	}
	if got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil || got.ID != task.ID {
		t.Fatalf("GetTask while draining: %v %v", got, err)
	}
}

// TestGRPCUnaryLargeMessage: a message bigger than readMessage's buffer,
// which arrives in several HTTP/2 DATA frames, is read whole: the task's
// history holds its text, every byte.
func TestGRPCUnaryLargeMessage(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	addr := grpcFront(t, Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	text := strings.Repeat("0123456789abcdef", 5000) // 80,000 bytes
	res, err := c.SendMessage(context.Background(), &a2a.MessageSendParams{Message: &a2a.Message{ID: "large", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.History) == 0 {
		t.Fatalf("SendMessage: %#v", res)
	}
	if p, ok := task.History[0].Parts[0].(a2a.TextPart); !ok || p.Text != text {
		t.Fatalf("the stored message's first part is not the text sent (%T)", task.History[0].Parts[0])
	}
}
