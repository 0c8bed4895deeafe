package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/tlsconfig"
)

// BenchmarkFrontSend is figure 2's front in one process, per call: agentd's
// listener split over mTLS with SPIFFE authentication, one send at a time
// on one keep-alive connection, as JSON-RPC message/send over HTTP/1.1 (the
// figure's client: the answer's bytes checked) and as A2A 1.0 SendMessage
// over gRPC (grpc-go's client with its defaults and the generated stub: the
// task's state checked). Client and
// server share the process, so ns/op and allocs/op are both sides' cost
// (-cpuprofile tells them apart); cpu-ns/op is the process's CPU time a
// call, which the machine's other load moves less than ns/op, and ctxsw/op
// its threads' context switches (each a thread that slept and was woken, or
// was preempted: the hand-offs between goroutines that cross threads); srv-reads/op
// and srv-writes/op count the server connection's reads and writes (a
// client's PING and its ack are one of each).
//
// grpc-fixedwindow is the gRPC call from a client with a2agrpc's fixed
// windows (a2agrpc.WindowOptions, as agentd's client of its peers and the
// figure's), which sends no bandwidth-delay PING after an answer: grpc-go's
// default client sends one after about every answer at concurrency 1, and
// the server acks it.
func BenchmarkFrontSend(b *testing.B) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(1_000_000, time.Hour), doneExec{}, nil)
	url, cl, clientTLS := serveBenchFront(b, engine)
	b.Run("jsonrpc", func(b *testing.B) {
		tc := clientTLS()
		tc.NextProtos = []string{"http/1.1"}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 2, DisableCompression: true}}
		defer c.CloseIdleConnections()
		defer cl.report(b)()
		for i := 0; b.Loop(); i++ {
			body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"j-%d","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`, i, i)
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			got, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != 200 || !bytes.Contains(got, []byte(`"state":"completed"`)) {
				b.Fatalf("message/send: HTTP %d %v: %s", res.StatusCode, err, got)
			}
		}
	})
	for _, fixed := range []bool{false, true} {
		name := "grpc"
		opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(clientTLS()))}
		if fixed {
			name = "grpc-fixedwindow"
			opts = append(opts, a2agrpc.WindowOptions()...)
		}
		b.Run(name, func(b *testing.B) {
			conn, err := grpc.NewClient("passthrough:///"+cl.Addr().String(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			c := a2apb.NewA2AServiceClient(conn)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "a2a-version", "1.0")
			defer cl.report(b)()
			for i := 0; b.Loop(); i++ {
				res, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: fmt.Sprintf("g-%d", i), Role: a2apb.Role_ROLE_USER,
					Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}})
				if err != nil || res.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
					b.Fatalf("SendMessage: %v %v", res, err)
				}
			}
		})
	}
}

// serveBenchFront serves handler as the front does, behind the listener
// split over mTLS with SPIFFE authentication on 127.0.0.1, until the
// benchmark ends. It returns the front's URL, its listener's counter and a
// maker of the peer's client TLS configuration.
func serveBenchFront(b *testing.B, handler a2asrv.RequestHandler) (string, *countingListener, func() *tls.Config) {
	b.Helper()
	ca, err := tlsconfig.NewDevCA(testTD, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	svid, err := ca.MintX509SVID(serverID, tlsconfig.SVIDOptions{})
	if err != nil {
		b.Fatal(err)
	}
	src := &spiffetest.Source{}
	src.Set(svid, []*x509bundle.Bundle{ca.Bundle()}, nil)
	cfg := Config{Handler: handler, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "https://x/"}),
		Auth: &Auth{Source: src, Policy: tlsconfig.Policy{Peers: []spiffeid.ID{peerID}}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	var limits ConnLimits
	srv := limits.Server(Handler(cfg), nil)
	srv.ErrorLog = log.New(io.Discard, "", 0)
	s, err := NewSplit(limits.Listener(cl, nil), tlsconfig.ServerConfig(src), srv, GRPCServer(cfg, limits), limits, nil)
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve()
	b.Cleanup(func() { s.Close() })
	peer, err := ca.MintX509SVID(peerID, tlsconfig.SVIDOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return "https://" + ln.Addr().String() + "/", cl, func() *tls.Config {
		return tlsconfig.ClientConfig(peer, ca.Bundle(), spiffetls.AuthorizeID(serverID))
	}
}

// countingListener counts the reads and writes of the connections it
// accepts.
type countingListener struct {
	net.Listener
	reads, writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.l.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

// report starts counting a benchmark's allocations, the process's CPU time
// (user and system) and the server connections' reads and writes; the
// function it returns reports them per call.
func (l *countingListener) report(b *testing.B) func() {
	b.ReportAllocs()
	cpu, sw := cpuTime()
	r, w := l.reads.Load(), l.writes.Load()
	return func() {
		if b.N == 0 {
			return
		}
		n := float64(b.N)
		cpu2, sw2 := cpuTime()
		b.ReportMetric(float64(cpu2-cpu)/n, "cpu-ns/op")
		b.ReportMetric(float64(sw2-sw)/n, "ctxsw/op")
		b.ReportMetric(float64(l.reads.Load()-r)/n, "srv-reads/op")
		b.ReportMetric(float64(l.writes.Load()-w)/n, "srv-writes/op")
	}
}

// cpuTime is the process's CPU time (user and system) and its threads'
// context switches (voluntary: a thread that blocked; involuntary: one the
// kernel preempted) so far.
func cpuTime() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw
}
