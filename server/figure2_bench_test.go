package server

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/supervisor/delegate"
)

// figure2Engine is the engine of figure 2's front (cmd/bench/front.go,
// newInstantEngine): the real executor and delegation router with a local
// provider whose runs have completed when they start, a bounded memory
// store, the pusher, and the admission control a 1 GiB pod derives.
func figure2Engine(tb testing.TB, capacity int) *tasks.Engine {
	tb.Helper()
	logger := slog.New(slog.DiscardHandler)
	router := &delegate.Router{}
	if err := router.Register(echoProvider{}); err != nil {
		tb.Fatal(err)
	}
	exec := a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router:       router,
		CancelHandle: func(string, string) bool { return false },
		Limits:       api.Limits{MaxSteps: 50, MaxTokens: 200000, Deadline: api.Duration(10 * time.Minute), MaxChildren: 8},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
		PublicURL:    "https://x/",
		Instance:     "bench",
		MaxDepth:     func() int { return 4 },
		Lineages:     &delegate.Lineages{},
		Log:          logger,
	})
	store := tasks.NewMemoryStore(capacity, time.Hour)
	pusher := tasks.NewPusher(tasks.PushSettings{Log: logger}, store.ListPush) // the memory store keeps no push journal
	d := admit.Derive(1<<30, 2)
	adm, err := admit.New(admit.Config{Bounds: d.Bounds, Ceiling: d.Ceiling})
	if err != nil {
		tb.Fatal(err)
	}
	return tasks.NewEngine(store, exec, logger, tasks.WithPusher(pusher), tasks.WithAdmission(adm, admit.Policy{}))
}

// BenchmarkFigure2Send is figure 2's JSON-RPC message/send at concurrency 1
// in one process: the figure's engine (figure2Engine, its store full, as the
// figure's warm-up leaves it) behind the listener split over mTLS with
// SPIFFE authentication, one keep-alive HTTP/1.1 connection, the answer's
// bytes checked. Client and server share the process: ns/op and allocs/op
// are both sides' cost; cpu-ns/op is the process's CPU a call.
func BenchmarkFigure2Send(b *testing.B) {
	const capacity = 10000
	url, cl, clientTLS := serveBenchFront(b, figure2Engine(b, capacity))
	tc := clientTLS()
	tc.NextProtos = []string{"http/1.1"}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 2, DisableCompression: true}}
	defer c.CloseIdleConnections()
	n := 0
	send := func() {
		n++
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"bench-%d","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`, n, n)
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
	for range capacity + 100 { // the store full, as figure 2's warm-up leaves it
		send()
	}
	defer cl.report(b)()
	for b.Loop() {
		send()
	}
}
