package server

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/tasks"
)

// BenchmarkGRPCSendMessage is one blocking SendMessage over the gRPC
// binding on loopback h2c, with the engine of BenchmarkMessageSend: through
// the front (net/http's HTTP/2 server, authentication, grpcUnaryServer), and,
// for comparison, through grpc's own HTTP/2 transport serving the same
// service (grpc.Server.Serve, no front), which the binding does not use; the
// difference is what serving gRPC on the front's listener costs.
func BenchmarkGRPCSendMessage(b *testing.B) {
	for _, native := range []bool{false, true} {
		name := "front"
		if native {
			name = "grpc-transport"
		}
		b.Run(name, func(b *testing.B) {
			engine := tasks.NewEngine(tasks.NewMemoryStore(1_000_000, time.Hour), doneExec{}, nil)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if native {
				gs := newGRPC(engine, 1<<20, nil, nil)
				go gs.Serve(ln)
				defer gs.Stop()
			} else {
				srv := &http.Server{Handler: Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})}),
					Protocols: PlainProtocols(ln.Addr()), ErrorLog: log.New(io.Discard, "", 0)}
				go srv.Serve(ln)
				defer srv.Close()
			}
			conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			c := a2apb.NewA2AServiceClient(conn)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				res, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: fmt.Sprintf("m-%d", i), Role: a2apb.Role_ROLE_USER,
					Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}})
				if err != nil || res.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
					b.Fatalf("SendMessage: %v %v", res, err)
				}
			}
		})
	}
}
