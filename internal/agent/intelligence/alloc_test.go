package intelligence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

// quietServer is a model endpoint on 127.0.0.1 that allocates little per
// request: it reads each request's body into a buffer of its own and
// answers with the same bytes every time, so that what a model call
// allocates can be counted around it in the same process.
type quietServer struct {
	ln      net.Listener
	srv     *http.Server
	answer  []byte
	chunked bool // answer without a Content-Length
	got     []byte
	last    int // bytes of the last request's body
}

func newQuietServer(t testing.TB, answer string, chunked bool) *quietServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &quietServer{ln: ln, answer: []byte(answer), chunked: chunked, got: make([]byte, 1<<20)}
	s.srv = &http.Server{Handler: s}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

func (s *quietServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.ReadFull(r.Body, s.got)
	s.last = n
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	if !s.chunked {
		h["Content-Length"] = []string{strconv.Itoa(len(s.answer))}
	}
	w.WriteHeader(http.StatusOK)
	if s.chunked {
		// In pieces, flushed: a chunked answer of unknown length.
		for b := s.answer; len(b) > 0; {
			k := min(len(b), 1000)
			_, _ = w.Write(b[:k])
			w.(http.Flusher).Flush()
			b = b[k:]
		}
		return
	}
	_, _ = w.Write(s.answer)
}

func (s *quietServer) endpoint() string { return "http://" + s.ln.Addr().String() + "/v1" }

// allocated is the fewest bytes the process allocated while f ran, of 5
// runs after one to warm up what is made once (the connection,
// encoding/json's caches): the server's goroutines allocate a little,
// not always the same. It runs on one P. Under the race detector the test
// is skipped.
func allocated(t *testing.T, f func()) uint64 {
	t.Helper()
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops some of what is put back: allocations vary")
	}
	// One P: what net/http puts back in a sync.Pool is then what the next
	// run takes (a pool's last Put is the P's own, which no other P takes).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// figure9Call is figure 9's second model call: a 64 KiB objective (in the
// system prompt and the first turn), a tool call with 16 KiB of arguments
// and its result, and the self-tools offered.
func figure9Call() *Request {
	turn := strings.Repeat("the agent read the file and found ", 64<<10/34)
	result := strings.Repeat("h", 16<<10)
	var tools []ToolSpec
	for _, t := range api.SelfToolSpecs() {
		tools = append(tools, ToolSpec{Name: ModelToolName(t.Name), Wire: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return &Request{System: "Objective:\n" + turn, Tools: tools, Messages: []Message{
		{Role: RoleUser, Content: turn},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call-0", Name: "subagent_status", Args: json.RawMessage(`{"handle":"` + result + `"}`)}}},
		{Role: RoleTool, ToolCallID: "call-0", Content: "ERROR: no subagent " + result},
	}}
}

// A request's body goes onto a plain HTTP connection through the
// connection's 8 KiB buffer, made once: net/http's copy onto a TCP
// connection made a 32 KiB buffer for every request (net.genericReadFrom),
// which a child waiting on its answer keeps.
func TestRequestBodyWrittenWithoutCopyBuffer(t *testing.T) {
	srv := newQuietServer(t, okBody("done"), false)
	client := &http.Client{Transport: newTransport()}
	cr := figure9Request()
	body, err := chatBody(&cr)
	if err != nil {
		t.Fatal(err)
	}
	var sink [512]byte
	n := allocated(t, func() {
		hr, err := newPost(context.Background(), srv.endpoint()+"/chat/completions", body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.ReadFull(resp.Body, sink[:len(srv.answer)]); err != nil {
			t.Fatal(err)
		}
	})
	if srv.last != int(body.size) || srv.last < 100<<10 {
		t.Fatalf("the server read %d bytes of a %d-byte request; want figure 9's (over 100 KiB), whole", srv.last, body.size)
	}
	if n > 24<<10 {
		t.Fatalf("a request of %d bytes allocated %d bytes, client and server; want at most 24 KiB (no copy buffer)", srv.last, n)
	}
}

// An answer whose length the server says (Content-Length) is read into
// one slice of that length: io.ReadAll's growing buffers and final copy
// allocated about twice it. An answer of unknown length (chunked) is read
// whole as before; one cut short of its Content-Length is an error.
func TestAnswerReadIntoItsLength(t *testing.T) {
	answer := okBody(strings.Repeat("x", 16<<10))
	client := &http.Client{Transport: newTransport()}
	body := &jsonBody{}
	body.raw("{}")
	body.done()
	for _, chunked := range []bool{false, true} {
		srv := newQuietServer(t, answer, chunked)
		var got []byte
		n := allocated(t, func() {
			hr, err := newPost(context.Background(), srv.endpoint(), body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got, err = readAnswer(resp); err != nil {
				t.Fatal(err)
			}
		})
		if string(got) != answer {
			t.Fatalf("chunked %v: read %d bytes, want the %d of the answer", chunked, len(got), len(answer))
		}
		if limit := uint64(len(answer)) + 16<<10; !chunked && n > limit {
			t.Errorf("an answer of %d bytes with its Content-Length allocated %d bytes, client and server; want at most %d (one slice of its length)", len(answer), n, limit)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// The whole request read (its body is {}), then half an answer:
		// the connection ends with nothing unread (a reset otherwise).
		var req []byte
		buf := make([]byte, 4096)
		for !bytes.HasSuffix(req, []byte("\r\n\r\n{}")) {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			req = append(req, buf[:k]...)
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"choices\":")
	}()
	hr, err := newPost(context.Background(), "http://"+ln.Addr().String()+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := readAnswer(resp); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("an answer cut short of its length: %q, %v; want io.ErrUnexpectedEOF", b, err)
	}
}

// What net/http copies of a body after its Content-Length (to io.Discard:
// nothing) is copied by the body itself, with no buffer: io.Discard's own
// copy took an 8 KiB buffer from a pool, which a child's first request
// filled and kept.
func TestRequestBodyDrainedWithoutBuffer(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops some of what is put back: allocations vary")
	}
	cr := figure9Request()
	body, err := chatBody(&cr)
	if err != nil {
		t.Fatal(err)
	}
	rc, size, _ := body.open()
	if _, ok := rc.(io.WriterTo); !ok {
		t.Fatal("the body does not write itself (io.WriterTo): io.Copy to io.Discard reads it through a buffer")
	}
	p := make([]byte, 4000)
	for lr := (&io.LimitedReader{R: rc, N: size}); lr.N > 0; {
		if _, err := lr.Read(p); err != nil {
			t.Fatal(err)
		}
	}
	least := uint64(math.MaxUint64)
	for range 3 { // the least of three: the process's other goroutines allocate too
		// Twice: the first collection moves what pools hold aside, the
		// second drops it.
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		n, err := io.Copy(io.Discard, rc)
		runtime.ReadMemStats(&after)
		if n != 0 || err != nil {
			t.Fatalf("copied %d bytes after the body's length, %v", n, err)
		}
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if least > 0 {
		t.Fatalf("copying the end of a body to io.Discard allocated %d bytes; want none", least)
	}
}

// BenchmarkFigure9Call is figure 9's second model call against a local
// server on 127.0.0.1: the request written onto the connection, a short
// answer read (the CPU a call spends, client and server).
func BenchmarkFigure9Call(b *testing.B) {
	srv := newQuietServer(b, okBody("done"), false)
	m, err := New(api.Intelligence{Endpoint: srv.endpoint(), Model: "m"}, "")
	if err != nil {
		b.Fatal(err)
	}
	req := figure9Call()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
