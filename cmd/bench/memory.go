package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/testkit"
)

var memoryFigure = figure{name: "memory", run: runMemory, rows: memoryRows}

// memoryRound is one round of figure 5, in bytes.
type memoryRound struct {
	Idle       float64 `json:"idle"`        // serve's RSS, no pool, no task
	Loaded     float64 `json:"loaded"`      // serve's RSS with LiveChildren children
	ChildRSS   float64 `json:"child_rss"`   // median RSS of one child
	ChildPSS   float64 `json:"child_pss"`   // median PSS of one child (shared pages split)
	StoreHeap  float64 `json:"store_heap"`  // live heap of the engine after Tasks tasks
	StoreTasks int     `json:"store_tasks"` // tasks the store holds then
}

func runMemory(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	var rounds []memoryRound
	for r := 0; r < cfg.Rounds; r++ {
		mr, err := serveMemory(ctx, cfg, logw)
		if err != nil {
			return nil, err
		}
		if mr.StoreHeap, mr.StoreTasks, err = storeMemory(ctx, cfg); err != nil {
			return nil, err
		}
		rounds = append(rounds, mr)
		fmt.Fprintf(logw, "bench: memory round %d: %+v\n", r+1, mr)
	}
	return rounds, nil
}

// serveMemory measures one fresh `agentd serve` (no warm pool): idle, then
// with LiveChildren tasks running builtin:wait, one child each.
func serveMemory(ctx context.Context, cfg Config, logw io.Writer) (memoryRound, error) {
	var mr memoryRound
	srv, err := startServe(ctx, cfg.Agentd, []string{"--warm-pool", "0", "--intelligence", "builtin:wait"}, logw)
	if err != nil {
		return mr, err
	}
	defer srv.stop()
	c := &http.Client{}
	// One request through the front first, so idle includes a served request.
	if err := postJSON(ctx, c, srv.url, []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"none"}}`), `"error"`); err != nil {
		return mr, err
	}
	if mr.Idle, err = rss(srv.pid()); err != nil {
		return mr, err
	}
	for i := 0; i < cfg.LiveChildren; i++ {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"mem-%d","role":"user","parts":[{"kind":"text","text":"wait"}]}}}`, i+1, i)
		if err := postJSON(ctx, c, srv.url, body, `"state":"`); err != nil {
			return mr, err
		}
	}
	// Every child has logged "subagent started": it has its payload and is
	// blocked in its model call.
	if err := poll(ctx, 60*time.Second, 5*time.Millisecond, "children started", func() bool {
		return srv.started.Load() >= int64(cfg.LiveChildren)
	}); err != nil {
		return mr, err
	}
	kids := testkit.Children(srv.pid())
	if len(kids) != cfg.LiveChildren {
		return mr, fmt.Errorf("%d children, want %d", len(kids), cfg.LiveChildren)
	}
	if mr.Loaded, err = rss(srv.pid()); err != nil {
		return mr, err
	}
	var rs, ps []float64
	for _, k := range kids {
		r, err := rss(k)
		if err != nil {
			return mr, err
		}
		p, err := pss(k)
		if err != nil {
			return mr, err
		}
		rs, ps = append(rs, r), append(ps, p)
	}
	mr.ChildRSS, mr.ChildPSS = median(rs), median(ps)
	return mr, nil
}

// postJSON posts body and checks that the answer is 200 and contains want.
func postJSON(ctx context.Context, c *http.Client, url string, body []byte, want string) error {
	b, status, err := post(ctx, c, url, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK || !bytes.Contains(b, []byte(want)) {
		return fmt.Errorf("POST: HTTP %d: %.300s", status, b)
	}
	return nil
}

// storeMemory puts Tasks messages through agentd's engine (instant provider)
// and returns the live heap they leave, and how many tasks the store holds.
func storeMemory(ctx context.Context, cfg Config) (float64, int, error) {
	before := liveHeap()
	engine := newInstantEngine(cfg.TaskCapacity, "https://127.0.0.1/", nil)
	for i := 0; i < cfg.Tasks; i++ {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "count these words please"})
		res, err := engine.OnSendMessage(ctx, &a2a.MessageSendParams{Message: msg})
		if err != nil {
			return 0, 0, err
		}
		if t, ok := res.(*a2a.Task); !ok || t.Status.State != a2a.TaskStateCompleted {
			return 0, 0, fmt.Errorf("task %d did not complete: %v", i, res)
		}
	}
	if err := engine.Wait(ctx); err != nil {
		return 0, 0, err
	}
	after := liveHeap()
	n := engine.Store().(*tasks.MemoryStore).Len()
	runtime.KeepAlive(engine)
	return after - before, n, nil
}

// liveHeap is the heap in use after a full collection.
func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

func memoryRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[memoryRound](raw)
	if err != nil {
		return nil, err
	}
	med := func(f func(memoryRound) float64) float64 { return medianOf(rounds, f) }
	idle, loaded := med(func(r memoryRound) float64 { return r.Idle }), med(func(r memoryRound) float64 { return r.Loaded })
	heap := med(func(r memoryRound) float64 { return r.StoreHeap })
	held := int(med(func(r memoryRound) float64 { return float64(r.StoreTasks) }))
	return []row{
		{fig: 5, what: "memory: agentd serve RSS, idle (no pool)", other: fmtMiB(idle)},
		{fig: 5, what: fmt.Sprintf("memory: agentd serve RSS with %d live children", cfg.LiveChildren), other: fmtMiB(loaded),
			ratio: fmt.Sprintf("+%.0f KiB per child in the supervisor", (loaded-idle)/float64(cfg.LiveChildren)/1024)},
		{fig: 5, what: "memory: one child (builtin:wait, in its model call)",
			other: fmtMiB(med(func(r memoryRound) float64 { return r.ChildRSS })) + " RSS, " + fmtMiB(med(func(r memoryRound) float64 { return r.ChildPSS })) + " PSS"},
		{fig: 5, what: fmt.Sprintf("memory: task store after %d completed tasks (capacity %d)", cfg.Tasks, cfg.TaskCapacity),
			other: fmt.Sprintf("%s live heap, %d tasks held", fmtMiB(heap), held),
			ratio: fmt.Sprintf("%.1f KiB per held task", heap/float64(max(held, 1))/1024)},
	}, nil
}
