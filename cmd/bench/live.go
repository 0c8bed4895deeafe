package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Figure 9, live: what a subagent costs while it waits on its model, the
// state agents spend most of their lives in. `agentd serve` runs N subagents
// at once, each blocked in a model call to a local slow model server (Chat
// Completions, in this process) that holds the answer; each carries a
// conversation like a real run's: its first user turn LiveConversation bytes
// (the earlier turns), then one tool round trip whose result is
// LiveToolResult bytes. The tool is the real subagent.status self-tool,
// served by the supervisor over the control channel: the server asks it for a
// handle of LiveToolResult bytes, and its answer (an error naming the handle)
// is that long, so the assistant turn and the tool turn each carry it. Per N:
// the supervisor's RSS and Go heap (its /metrics), and every child's PSS and
// private memory (smaps_rollup), summed and per child. The tree variant is
// N/9 runs of a root that spawns 8 async children, every process in a model
// call with the same conversation. Beside it: bench/floor waiting on its
// pipe (private memory), and an idle warm-pool child (a child after init,
// before its payload).
var liveFigure = figure{name: "live", run: runLive, rows: liveRows}

// Sizes of the live figure's conversation.
const (
	LiveConversation = 64 << 10 // the earlier turns: the first user turn's bytes
	LiveToolResult   = 16 << 10 // the tool result of the last step
	liveTreeFanout   = 8        // children per root in the tree variant
	livePoolProbe    = 8        // idle warm-pool children measured after init
)

// Markers the slow model server tells the roles apart by (in the first user
// turn).
const (
	markLeaf = "BENCH-LEAF"
	markRoot = "BENCH-ROOT"
)

// liveMeasure is one measurement of a service with live children, in bytes.
type liveMeasure struct {
	Procs       int     `json:"procs"`    // children measured
	SupRSS      float64 `json:"sup_rss"`  // the supervisor's RSS
	SupHeap     float64 `json:"sup_heap"` // its Go heap in use (go_memstats_heap_inuse_bytes)
	SupIdleRSS  float64 `json:"sup_idle"` // its RSS before the first message
	SupAnon     float64 `json:"sup_anon"` // its anonymous RSS (RssAnon: not the binary's pages, which the children share)
	SupIdleAnon float64 `json:"sup_idle_anon"`
	// SupAfterRSS and SupAfterAnon are its RSS and anonymous RSS once the
	// run's children have all ended and twice LiveSettle has passed: what it keeps
	// for having served them (code paged in, the collector's state, the
	// store's caches, the ended tasks).
	SupAfterRSS  float64 `json:"sup_after"`
	SupAfterAnon float64 `json:"sup_after_anon"`
	SumPSS       float64 `json:"sum_pss"`     // the children's PSS, summed
	SumPriv      float64 `json:"sum_private"` // the children's private memory (clean + dirty), summed
	MaxPSS       float64 `json:"max_pss"`     // the largest child's PSS
	MaxPriv      float64 `json:"max_private"` // the largest child's private memory
}

// liveRound is one round of figure 9.
type liveRound struct {
	Flat      map[int]liveMeasure `json:"flat"` // by N
	Tree      map[int]liveMeasure `json:"tree"` // by N (N/9 trees)
	FloorPriv float64             `json:"floor_private"`
	FloorPSS  float64             `json:"floor_pss"`
	IdlePriv  float64             `json:"idle_private"` // an idle pool child: median private
	IdlePSS   float64             `json:"idle_pss"`
	// HeadPriv and HeadAnon are the largest idle pool child's private and
	// anonymous memory: the pool's next child in line, the one that
	// rehearsed its first turn (ctrl/rehearse).
	HeadPriv float64  `json:"head_private"`
	HeadAnon float64  `json:"head_anon"`
	Pod      *livePod `json:"pod,omitempty"` // in a 1 GiB memory cgroup (livepod.go)
}

func runLive(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	var rounds []liveRound
	for r := 0; r < cfg.Rounds; r++ {
		lr := liveRound{Flat: map[int]liveMeasure{}, Tree: map[int]liveMeasure{}}
		var err error
		if lr.FloorPriv, lr.FloorPSS, err = floorMemory(ctx, cfg.Floor); err != nil {
			return nil, err
		}
		var idle idlePool
		if idle, err = idleChildMemory(ctx, cfg, logw); err != nil {
			return nil, err
		}
		lr.IdlePriv, lr.IdlePSS, lr.HeadPriv, lr.HeadAnon = idle.priv, idle.pss, idle.headPriv, idle.headAnon
		for _, n := range cfg.LiveN {
			m, err := liveOnce(ctx, cfg, n, false, logw)
			if err != nil {
				return nil, fmt.Errorf("live %d: %w", n, err)
			}
			lr.Flat[n] = m
			fmt.Fprintf(logw, "bench: live round %d, %d flat: %+v\n", r+1, n, m)
			if n < liveTreeFanout+1 {
				continue
			}
			if m, err = liveOnce(ctx, cfg, n, true, logw); err != nil {
				return nil, fmt.Errorf("live %d tree: %w", n, err)
			}
			lr.Tree[n] = m
			fmt.Fprintf(logw, "bench: live round %d, %d in trees: %+v\n", r+1, n, m)
		}
		if cfg.LivePodRuns > 0 {
			pod, err := livePodOnce(ctx, cfg, logw)
			if err != nil {
				return nil, fmt.Errorf("live pod: %w", err)
			}
			lr.Pod = &pod
		}
		rounds = append(rounds, lr)
	}
	return rounds, nil
}

// smaps is one process's smaps_rollup: PSS and private memory, in bytes.
func smaps(pid int) (pssB, priv float64, err error) {
	if pssB, err = procBytes(pid, "smaps_rollup", "Pss"); err != nil {
		return 0, 0, err
	}
	clean, err := procBytes(pid, "smaps_rollup", "Private_Clean")
	if err != nil {
		return 0, 0, err
	}
	dirty, err := procBytes(pid, "smaps_rollup", "Private_Dirty")
	if err != nil {
		return 0, 0, err
	}
	return pssB, clean + dirty, nil
}

// floorMemory runs bench/floor, which blocks reading its spawn frame from
// stdin (a pipe), and measures it there.
func floorMemory(ctx context.Context, floor string) (float64, float64, error) {
	cmd := exec.CommandContext(ctx, floor)
	cmd.Env = append(os.Environ(), "AGENT_SUPERVISOR_PID="+strconv.Itoa(os.Getpid()))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// ctrl/ready is its first frame: past it, the floor waits on its pipe.
	var hdr [4]byte
	if _, err := io.ReadFull(stdout, hdr[:]); err != nil {
		return 0, 0, fmt.Errorf("floor: no ctrl/ready: %w", err)
	}
	pssB, priv, err := smaps(cmd.Process.Pid)
	return priv, pssB, err
}

// idlePool is what idleChildMemory measures: the median pool child's
// private memory and PSS, and the largest child's private and anonymous
// memory (the pool's head, which rehearsed).
type idlePool struct {
	priv, pss, headPriv, headAnon float64
}

// idleChildMemory measures the children of a warm pool of livePoolProbe:
// agentd children after their init, waiting for a payload.
func idleChildMemory(ctx context.Context, cfg Config, logw io.Writer) (idlePool, error) {
	var m idlePool
	srv, err := startServe(ctx, cfg.Agentd, []string{"--warm-pool", strconv.Itoa(livePoolProbe), "--intelligence", "builtin:wait", "--store", "memory"}, logw)
	if err != nil {
		return m, err
	}
	defer srv.stop()
	// A pool child is ready once it has sent ctrl/ready; then it only
	// waits (the head rehearses first). Settle until the median child's
	// and the largest child's memory stop growing.
	if err := poll(ctx, 60*time.Second, 5*time.Millisecond, "warm pool", func() bool { return srv.children() == livePoolProbe }); err != nil {
		return m, err
	}
	if err := poll(ctx, 10*time.Second, 100*time.Millisecond, "pool children settled", func() bool {
		var n idlePool
		var p, s []float64
		for _, k := range testkit.Children(srv.pid()) {
			a, b, err := smaps(k)
			if err != nil {
				return false
			}
			s, p = append(s, a), append(p, b)
			if b > n.headPriv {
				if n.headAnon, err = rssAnon(k); err != nil {
					return false
				}
				n.headPriv = b
			}
		}
		if len(p) != livePoolProbe {
			return false
		}
		n.priv, n.pss = median(p), median(s)
		stable := n.priv == m.priv && n.headPriv == m.headPriv
		m = n
		return stable
	}); err != nil {
		return m, err
	}
	return m, nil
}

// slowModel is the local model server: it answers a subagent's first call
// with a tool call (a root's with its spawns), and holds every later call
// until release.
type slowModel struct {
	ln      net.Listener
	srv     *http.Server
	held    atomic.Int64
	finals  atomic.Int64 // final answers given (after release)
	mu      sync.Mutex
	release chan struct{}
	pad     string // LiveConversation bytes of text
	handle  string // LiveToolResult bytes: the handle asked for
}

func newSlowModel() (*slowModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &slowModel{ln: ln, release: make(chan struct{}), pad: filler(LiveConversation), handle: filler(LiveToolResult)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.complete)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// filler is n bytes of plain words, the shape of a conversation's text.
func filler(n int) string {
	const words = "the agent read the file and found that the function returns early when the list is empty so the caller "
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		b.WriteString(words[:min(len(words), n-b.Len())])
	}
	return b.String()
}

func (m *slowModel) url() string { return "http://" + m.ln.Addr().String() + "/v1" }

func (m *slowModel) releaseAll() {
	m.mu.Lock()
	close(m.release)
	m.mu.Unlock()
}

func (m *slowModel) close() { _ = m.srv.Close() }

type slowRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (m *slowModel) complete(w http.ResponseWriter, r *http.Request) {
	var req slowRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	first, tooled := "", false
	for _, msg := range req.Messages {
		if msg.Role == "user" && first == "" {
			first = msg.Content
		}
		tooled = tooled || msg.Role == "tool"
	}
	tool := func(suffix string) string {
		for _, t := range req.Tools {
			if strings.HasSuffix(t.Function.Name, suffix) {
				return t.Function.Name
			}
		}
		return "subagent" + suffix
	}
	if !tooled {
		var calls []map[string]any
		if strings.Contains(first, markRoot) {
			for i := 0; i < liveTreeFanout; i++ {
				args, _ := json.Marshal(api.SpawnArgs{
					Contract:    api.OutputContract{Objective: fmt.Sprintf("%s %d %s", markLeaf, i, m.pad), OutputFormat: api.OutputFormat{Kind: api.FormatText}},
					Disposition: api.DispositionAsync,
				})
				calls = append(calls, toolCall(fmt.Sprintf("call-%d", i), tool("spawn"), string(args)))
			}
		} else {
			args, _ := json.Marshal(api.HandleArgs{Handle: m.handle})
			calls = append(calls, toolCall("call-0", tool("status"), string(args)))
		}
		writeChat(w, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, "tool_calls")
		return
	}
	m.mu.Lock()
	release := m.release
	m.mu.Unlock()
	m.held.Add(1)
	select {
	case <-release:
	case <-r.Context().Done():
		return
	}
	writeChat(w, map[string]any{"role": "assistant", "content": "done"}, "stop")
	m.finals.Add(1)
}

func toolCall(id, name, args string) map[string]any {
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
}

func writeChat(w http.ResponseWriter, msg map[string]any, finish string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10},
	})
}

// freePort returns a loopback address nothing listens on now.
func freePort() (string, error) {
	p, err := testkit.FreePort() // not the next ephemeral port, which another test's listener could take first
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// heapInuse reads go_memstats_heap_inuse_bytes from a /metrics listener.
func heapInuse(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("/metrics: no go_memstats_heap_inuse_bytes")
}

// liveOnce starts one `agentd serve` (no warm pool, so every child measured
// is in a run), brings n subagents into their held model call (n flat runs,
// or n/9 trees of a root and 8 children), measures, then releases them and
// stops the service.
func liveOnce(ctx context.Context, cfg Config, n int, tree bool, logw io.Writer) (liveMeasure, error) {
	var lm liveMeasure
	model, err := newSlowModel()
	if err != nil {
		return lm, err
	}
	defer model.close()
	metrics, err := freePort()
	if err != nil {
		return lm, err
	}
	runs, procs := n, n
	if tree {
		runs = n / (liveTreeFanout + 1)
		procs = runs * (liveTreeFanout + 1)
	}
	srv, err := startServe(ctx, cfg.Agentd, []string{
		"--warm-pool", "0", "--intelligence", model.url(), "--model", "bench",
		"--metrics-addr", metrics,
		"--max-live-runs", strconv.Itoa(runs), "--max-live-subagents", strconv.Itoa(procs),
		"--queue-capacity", strconv.Itoa(runs),
		"--max-inflight", strconv.Itoa(liveTreeFanout), "--max-children", strconv.Itoa(liveTreeFanout),
	}, logw)
	if err != nil {
		return lm, err
	}
	defer srv.stop()
	c := &http.Client{}
	if err := postJSON(ctx, c, srv.url, []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"none"}}`), `"error"`); err != nil {
		return lm, err
	}
	if lm.SupIdleRSS, err = rss(srv.pid()); err != nil {
		return lm, err
	}
	if lm.SupIdleAnon, err = rssAnon(srv.pid()); err != nil {
		return lm, err
	}
	if dir := os.Getenv(EnvLiveDump); dir != "" {
		if err := liveDump(ctx, dir, fmt.Sprintf("%d-%s-idle", n, map[bool]string{false: "flat", true: "tree"}[tree]), srv.pid(), nil, metrics); err != nil {
			return lm, err
		}
	}
	mark := markLeaf
	if tree {
		mark = markRoot
	}
	text, _ := json.Marshal(mark + " " + model.pad)
	for i := 0; i < runs; i++ {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"live-%d","role":"user","parts":[{"kind":"text","text":%s}]}}}`, i+1, i, text)
		if err := postJSON(ctx, c, srv.url, body, `"state":"`); err != nil {
			return lm, err
		}
	}
	// Every subagent is in its held model call, its tool turn sent (a
	// root's after its spawns' results).
	if err := poll(ctx, 10*time.Minute, 20*time.Millisecond, "subagents in their model call", func() bool {
		return model.held.Load() >= int64(procs)
	}); err != nil {
		return lm, fmt.Errorf("%w (%d of %d held)", err, model.held.Load(), procs)
	}
	// They are measured once they have waited LiveSettle, as a subagent
	// waits on its model for seconds: the spawns' garbage collected, and
	// the supervisor's free heap returned once it went quiet (as a
	// child's is once its model call has lasted 100 ms).
	select {
	case <-ctx.Done():
		return lm, ctx.Err()
	case <-time.After(cfg.LiveSettle):
	}
	kids := testkit.Children(srv.pid())
	if len(kids) != procs {
		return lm, fmt.Errorf("%d children, want %d", len(kids), procs)
	}
	lm.Procs = procs
	if lm.SupRSS, err = rss(srv.pid()); err != nil {
		return lm, err
	}
	if lm.SupAnon, err = rssAnon(srv.pid()); err != nil {
		return lm, err
	}
	if lm.SupHeap, err = heapInuse(ctx, metrics); err != nil {
		return lm, err
	}
	for _, k := range kids {
		p, v, err := smaps(k)
		if err != nil {
			return lm, err
		}
		lm.SumPSS += p
		lm.SumPriv += v
		lm.MaxPSS, lm.MaxPriv = max(lm.MaxPSS, p), max(lm.MaxPriv, v)
	}
	if dir := os.Getenv(EnvLiveDump); dir != "" {
		if err := liveDump(ctx, dir, fmt.Sprintf("%d-%s", n, map[bool]string{false: "flat", true: "tree"}[tree]), srv.pid(), kids, metrics); err != nil {
			return lm, err
		}
	}
	model.releaseAll()
	if err := poll(ctx, 5*time.Minute, 20*time.Millisecond, "children ended", func() bool { return srv.children() == 0 }); err != nil {
		return lm, err
	}
	// Twice the settle: their ends were a burst of their own.
	select {
	case <-ctx.Done():
		return lm, ctx.Err()
	case <-time.After(2 * cfg.LiveSettle):
	}
	if lm.SupAfterRSS, err = rss(srv.pid()); err != nil {
		return lm, err
	}
	if lm.SupAfterAnon, err = rssAnon(srv.pid()); err != nil {
		return lm, err
	}
	return lm, nil
}

func liveRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[liveRound](raw)
	if err != nil {
		return nil, err
	}
	med := func(f func(liveRound) float64) float64 { return medianOf(rounds, f) }
	floorPriv := med(func(r liveRound) float64 { return r.FloorPriv })
	idlePriv := med(func(r liveRound) float64 { return r.IdlePriv })
	goal := "goal <= 2 MiB: met"
	if idlePriv > 2<<20 {
		goal = "goal <= 2 MiB: missed"
	}
	rows := []row{
		{fig: 9, what: "live: floor (bench/floor waiting on its pipe)",
			other: fmtMiB(floorPriv) + " private, " + fmtMiB(med(func(r liveRound) float64 { return r.FloorPSS })) + " PSS"},
		{fig: 9, what: "live: an agentd child after init (idle in the warm pool)",
			other: fmt.Sprintf("%s private (%.0f KiB), %s PSS; %s", fmtMiB(idlePriv), idlePriv/1024, fmtMiB(med(func(r liveRound) float64 { return r.IdlePSS })), goal),
			ratio: fmtX(ratio(idlePriv, floorPriv)) + " the floor's private"},
	}
	// The pool's next child in line is a child after init that has begun
	// the run it is next to take: its rehearsal builds the payload's
	// decoders and runs the loop's code once (internal/agent). The goal is
	// the idle child's; this row shows what the rehearsal adds.
	if headPriv := med(func(r liveRound) float64 { return r.HeadPriv }); headPriv > 0 {
		rows = append(rows, row{fig: 9, what: "live: the warm pool's next child in line, after its rehearsal (the largest pool child)",
			other: fmt.Sprintf("%s private (%.0f KiB), %.0f KiB anonymous; +%.0f KiB over the idle child: what its rehearsal builds for the run it is next to take, no goal",
				fmtMiB(headPriv), headPriv/1024, med(func(r liveRound) float64 { return r.HeadAnon })/1024, (headPriv-idlePriv)/1024),
			ratio: fmtX(ratio(headPriv, floorPriv)) + " the floor's private"})
	}
	kib := func(v float64) string { return fmt.Sprintf("%.0f KiB", v/1024) }
	for _, variant := range []struct {
		name string
		get  func(liveRound) map[int]liveMeasure
	}{{"flat runs", func(r liveRound) map[int]liveMeasure { return r.Flat }}, {"trees of a root and 8 children", func(r liveRound) map[int]liveMeasure { return r.Tree }}} {
		var points []liveSlopePoint // one for each N, in cfg.LiveN's order
		var idle, idleAnon []float64
		for _, n := range cfg.LiveN {
			if _, ok := variant.get(rounds[0])[n]; !ok {
				continue
			}
			get := func(f func(liveMeasure) float64) float64 {
				return med(func(r liveRound) float64 { return f(variant.get(r)[n]) })
			}
			procs := get(func(m liveMeasure) float64 { return float64(m.Procs) })
			supRSS, supIdle := get(func(m liveMeasure) float64 { return m.SupRSS }), get(func(m liveMeasure) float64 { return m.SupIdleRSS })
			perSup := (supRSS - supIdle) / procs
			supAnon, supIdleAnon := get(func(m liveMeasure) float64 { return m.SupAnon }), get(func(m liveMeasure) float64 { return m.SupIdleAnon })
			perAnon := ""
			if supAnon > 0 {
				perAnon = fmt.Sprintf(" (anonymous: +%s; %s, idle %s)", kib((supAnon-supIdleAnon)/procs), fmtMiB(supAnon), fmtMiB(supIdleAnon))
			}
			sumPSS, sumPriv := get(func(m liveMeasure) float64 { return m.SumPSS }), get(func(m liveMeasure) float64 { return m.SumPriv })
			rows = append(rows,
				row{fig: 9, what: fmt.Sprintf("live: %d subagents in a model call (%s; 64 KiB conversation, 16 KiB tool result): the supervisor", int(procs), variant.name),
					other: fmt.Sprintf("RSS %s (idle %s), Go heap %s", fmtMiB(supRSS), fmtMiB(supIdle), fmtMiB(get(func(m liveMeasure) float64 { return m.SupHeap }))),
					ratio: fmt.Sprintf("+%s RSS per child over idle%s: the one-time growth counted in; no goal (the fitted row)", kib(perSup), perAnon)},
			)
			if after := get(func(m liveMeasure) float64 { return m.SupAfterRSS }); after > 0 {
				afterAnon := get(func(m liveMeasure) float64 { return m.SupAfterAnon })
				rows = append(rows, row{fig: 9,
					what:  fmt.Sprintf("live: %d subagents (%s): the supervisor once they had all ended", int(procs), variant.name),
					other: fmt.Sprintf("RSS %s (anonymous %s), read twice the settle after their ends", fmtMiB(after), fmtMiB(afterAnon)),
					ratio: fmt.Sprintf("+%s RSS per ended subagent over idle (anonymous +%s): what their runs left; no goal", kib((after-supIdle)/procs), kib((afterAnon-supIdleAnon)/procs))})
			}
			rows = append(rows,
				row{fig: 9, what: fmt.Sprintf("live: %d subagents (%s): the children", int(procs), variant.name),
					other: fmt.Sprintf("PSS %s, private %s in all; largest %s PSS, %s private", fmtMiB(sumPSS), fmtMiB(sumPriv),
						fmtMiB(get(func(m liveMeasure) float64 { return m.MaxPSS })), fmtMiB(get(func(m liveMeasure) float64 { return m.MaxPriv }))),
					ratio: fmt.Sprintf("%s PSS, %s private per child", kib(sumPSS/procs), kib(sumPriv/procs))},
			)
			// What one more live child costs the supervisor: the slope
			// between two Ns, without what it holds however many it runs
			// (warmed page caches, code first run, the collector's base).
			if len(points) > 0 && procs > points[len(points)-1].procs {
				prev := points[len(points)-1]
				d := procs - prev.procs
				slope := (supRSS - prev.rss) / d
				slopeGoal := "goal <= 64 KiB: met"
				if slope > 64<<10 {
					slopeGoal = "goal <= 64 KiB: missed"
				}
				rows = append(rows, row{fig: 9,
					what:  fmt.Sprintf("live: %s, from %d to %d subagents: the supervisor per added child", variant.name, int(prev.procs), int(procs)),
					other: fmt.Sprintf("RSS +%s, anonymous +%s over %d children", fmtMiB(supRSS-prev.rss), fmtMiB(supAnon-prev.anon), int(d)),
					ratio: fmt.Sprintf("+%s RSS per added child (anonymous +%s); %s", kib(slope), kib((supAnon-prev.anon)/d), slopeGoal)})
			}
			points = append(points, liveSlopePoint{procs: procs, rss: supRSS, anon: supAnon})
			idle, idleAnon = append(idle, supIdle), append(idleAnon, supIdleAnon)
		}
		if r, ok := liveFitRow(variant.name, points, median(idle), median(idleAnon)); ok {
			rows = append(rows, r)
		}
	}
	return append(rows, livePodRows(rounds)...), nil
}

// liveSlopePoint is the supervisor at one N, for the slope between Ns.
type liveSlopePoint struct{ procs, rss, anon float64 }

// liveFitRow is the goal's row for the supervisor's memory per live child:
// the least-squares line of its RSS over every N measured (at least two),
// RSS = base + N x slope. The slope is what each live child costs it. The
// base over its idle RSS is what it grows by once, whatever N: the pages of
// the binary's function table its first serving maps (stack growth through
// SQLite's calls) and its first collection's metadata; a figure over idle
// divided by N counts that growth in, as if each child at that N brought
// its share of it (at 45-50, 80-90 KiB of each child's 107-123;
// docs/performance.md, figure 9). The largest residual shows how well a
// line fits.
func liveFitRow(name string, pts []liveSlopePoint, idle, idleAnon float64) (row, bool) {
	if len(pts) < 2 {
		return row{}, false
	}
	fit := func(y func(liveSlopePoint) float64) (base, slope, resid float64) {
		var mx, my float64
		for _, p := range pts {
			mx += p.procs
			my += y(p)
		}
		mx, my = mx/float64(len(pts)), my/float64(len(pts))
		var sxy, sxx float64
		for _, p := range pts {
			sxy += (p.procs - mx) * (y(p) - my)
			sxx += (p.procs - mx) * (p.procs - mx)
		}
		if sxx == 0 {
			return math.NaN(), math.NaN(), math.NaN()
		}
		slope = sxy / sxx
		base = my - slope*mx
		for _, p := range pts {
			resid = max(resid, math.Abs(y(p)-(base+slope*p.procs)))
		}
		return base, slope, resid
	}
	base, slope, resid := fit(func(p liveSlopePoint) float64 { return p.rss })
	baseAnon, slopeAnon, _ := fit(func(p liveSlopePoint) float64 { return p.anon })
	ns := make([]string, len(pts))
	for i, p := range pts {
		ns[i] = strconv.Itoa(int(p.procs))
	}
	goal := "goal <= 64 KiB: met"
	if !(slope <= 64<<10) {
		goal = "goal <= 64 KiB: missed"
	}
	return row{fig: 9,
		what: fmt.Sprintf("live: %s, fitted over %s subagents: the supervisor per live child", name, strings.Join(ns, ", ")),
		other: fmt.Sprintf("RSS %s + N x %.0f KiB, largest residual %.0f KiB; the one-time growth over idle (%s) %s, anonymous %s",
			fmtMiB(base), slope/1024, resid/1024, fmtMiB(idle), fmtMiB(base-idle), fmtMiB(baseAnon-idleAnon)),
		ratio: fmt.Sprintf("+%.0f KiB RSS per live child (anonymous +%.0f KiB); %s", slope/1024, slopeAnon/1024, goal)}, true
}

// EnvLiveDump, when set to a directory, makes figure 9 copy, for each N
// while its subagents are held, the supervisor's smaps, status and /metrics
// and every child's smaps_rollup and status into DIR/N-variant/, and the
// supervisor's when it was read idle into DIR/N-variant-idle/: where the
// bytes sit and what the runs added (a diagnostic; the idle scrape of
// /metrics is then in the held reading, a few KiB).
const EnvLiveDump = "BENCH_LIVE_DUMP"

func liveDump(ctx context.Context, dir, name string, sup int, kids []int, metrics string) error {
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	copyProc := func(pid int, file, as string) error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, as), b, 0o644)
	}
	for _, f := range []string{"smaps", "status"} {
		if err := copyProc(sup, f, "supervisor."+f); err != nil {
			return err
		}
	}
	for _, k := range kids {
		for _, f := range []string{"smaps_rollup", "status"} {
			if err := copyProc(k, f, fmt.Sprintf("%d.%s", k, f)); err != nil {
				return err
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metrics+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "supervisor.metrics"), b, 0o644)
}
