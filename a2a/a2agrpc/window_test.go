package a2agrpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
)

// sizedAgent answers SendMessage with a completed task whose one artifact
// is a text of size bytes.
type sizedAgent struct {
	a2apb.UnimplementedA2AServiceServer
	size int
}

func (s *sizedAgent) SendMessage(_ context.Context, r *a2apb.SendMessageRequest) (*a2apb.SendMessageResponse, error) {
	t := &a2apb.Task{Id: "t-" + r.GetMessage().GetMessageId(), ContextId: "c", Status: &a2apb.TaskStatus{State: a2apb.TaskState_TASK_STATE_COMPLETED}}
	if s.size > 0 {
		t.Artifacts = []*a2apb.Artifact{{ArtifactId: "a", Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: strings.Repeat("x", s.size)}}}}}
	}
	return &a2apb.SendMessageResponse{Payload: &a2apb.SendMessageResponse_Task{Task: t}}, nil
}

// writeLog keeps what a client's connections wrote.
type writeLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c *loggedConn) Write(p []byte) (int, error) {
	c.log.mu.Lock()
	c.log.buf.Write(p)
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}

// sizedClient serves a sizedAgent over h2c on loopback and returns a2agrpc's
// client of it, whose connection's writes w keeps.
func sizedClient(t *testing.T, size int, w *writeLog) *Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxSendMsgSize(64 << 20))
	a2apb.RegisterA2AServiceServer(gs, &sizedAgent{size: size})
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	c, err := New(ln.Addr().String(), Options{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &loggedConn{Conn: conn, log: w}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t *testing.T, c *Client, id string) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), &a2a.MessageSendParams{Message: &a2a.Message{ID: id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}}})
	if err != nil {
		t.Fatalf("SendMessage %s: %v", id, err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage %s answered %#v", id, res)
	}
	return task
}

// TestClientSendsNoPingPerCall: a2agrpc's client, with fixed windows, sends
// no PING over a run of calls, where grpc-go's default client probes the
// bandwidth-delay product with one after about every answer (a round trip
// the server must ack).
func TestClientSendsNoPingPerCall(t *testing.T) {
	w := &writeLog{}
	c := sizedClient(t, 100, w)
	for i := range 10 {
		send(t, c, fmt.Sprint(i))
	}
	w.mu.Lock()
	written := bytes.Clone(w.buf.Bytes())
	w.mu.Unlock()
	rest, ok := bytes.CutPrefix(written, []byte(http2.ClientPreface))
	if !ok {
		t.Fatalf("the client wrote no HTTP/2 preface: %q", written[:min(len(written), 32)])
	}
	fr := http2.NewFramer(nil, bytes.NewReader(rest))
	fr.SetMaxReadFrameSize(1 << 24)
	pings, frames := 0, 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("frame %d the client wrote: %v", frames, err)
		}
		frames++
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
		}
	}
	if pings != 0 {
		t.Fatalf("the client sent %d PINGs over 10 calls (%d frames), want none", pings, frames)
	}
}

// TestClientLargeAnswer: an answer larger than the stream's and the
// connection's windows still arrives whole, a window at a time.
func TestClientLargeAnswer(t *testing.T) {
	const size = ConnWindow + StreamWindow + 1
	c := sizedClient(t, size, &writeLog{})
	for i := range 2 {
		task := send(t, c, fmt.Sprint(i))
		if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts[0].(a2a.TextPart).Text) != size {
			t.Fatalf("answer %d: the artifact did not arrive whole", i)
		}
	}
}
