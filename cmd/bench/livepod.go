package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
)

// Figure 9's pod: how many live subagents one `agentd serve` holds in a
// real 1 GiB memory cgroup, as deployed: the default warm pool, the bounds
// derived from the cgroup's limit (which the service reads itself), the
// default store and sample interval. cfg.LivePodRuns runs of figure 9's
// conversation are sent at once (non-blocking); the service admits what
// its gate leaves room for, queues or sheds the rest, and what it shed is
// sent again after its Retry-After until a pass takes none; once the number
// held in their model call stops growing, the pod is measured: that
// number, the cgroup's working set and its peak, how often it reached its
// limit, the kernel's OOM kills in it (which must be none), and what the charge is
// made of (anonymous memory, page cache, the kernel's: page tables and
// kernel stacks are charged to a cgroup, though no PSS counts them). Where no
// memory cgroup can be made (not root, no controller) the row says so.
const (
	LivePodLimit = 1 << 30
	LivePodRuns  = 400 // the default of Config.LivePodRuns
	// livePodSettle is how long the number held must stay unchanged for
	// the pod to count as full.
	livePodSettle = 3 * time.Second
	// livePodPasses bounds the passes of sends again after a 429.
	livePodPasses = 20
)

// livePod is one measurement of the pod.
type livePod struct {
	Skipped   string  `json:"skipped,omitempty"` // why it was not measured
	Sent      int     `json:"sent"`
	Accepted  int     `json:"accepted"`  // answered with a task (running or queued)
	Shed      int     `json:"shed"`      // answered 429 on the first pass
	Unsent    int     `json:"unsent"`    // still answered 429 when a pass of sends again took none
	Held      int     `json:"held"`      // subagents in their model call at the end
	Derived   int     `json:"derived"`   // the derived max_live_subagents for the limit and pool
	Ceiling   int     `json:"ceiling"`   // its ceiling
	Working   float64 `json:"working"`   // the cgroup's working set, full
	PeakWS    float64 `json:"peak_ws"`   // the working set's peak, sampled every 20 ms
	Peak      float64 `json:"peak"`      // the cgroup's peak usage (page cache included)
	AtLimit   uint64  `json:"at_limit"`  // times the charge reached the limit
	OOMKills  uint64  `json:"oom_kills"` // processes the kernel OOM-killed
	Processes int     `json:"processes"` // the service's children at the end (the pool's included)
	Anon      float64 `json:"anon"`      // of the cgroup's charge when full: anonymous memory (heaps, stacks)
	File      float64 `json:"file"`      // page cache (the store's files)
	Kernel    float64 `json:"kernel"`    // kernel memory (page tables, kernel stacks, slab)
	DefPool   int     `json:"warm_pool"` // the default warm pool
	// Through the runs' ends: every accepted run completed once the model
	// answered them all (the queued ones run then too), sampled the same way.
	EndPeakWS   float64 `json:"end_peak_ws"`   // the working set's peak, from full to the last run's end
	EndAtLimit  uint64  `json:"end_at_limit"`  // times the charge reached the limit, by the end
	EndOOMKills uint64  `json:"end_oom_kills"` // processes the kernel OOM-killed, by the end
	Completed   int     `json:"completed"`     // runs that ended (the model's final answers)
}

// defaultWarmPool is serve's default --warm-pool.
const defaultWarmPool = 2

func livePodOnce(ctx context.Context, cfg Config, logw io.Writer) (livePod, error) {
	d := admit.Derive(LivePodLimit, defaultWarmPool)
	lp := livePod{Sent: cfg.LivePodRuns, Derived: d.MaxLive, Ceiling: d.Ceiling.MaxLive, DefPool: defaultWarmPool}
	cg, err := testkit.MakeMemoryCgroup(LivePodLimit)
	if err != nil {
		lp.Skipped = err.Error()
		return lp, nil
	}
	defer func() {
		if err := cg.Remove(time.Minute); err != nil {
			fmt.Fprintf(logw, "bench: %v\n", err)
		}
	}()
	dir, err := os.MkdirTemp("", "agentd-bench-pod-")
	if err != nil {
		return lp, err
	}
	defer os.RemoveAll(dir)
	wrapped, err := cg.Wrap(dir, cfg.Agentd)
	if err != nil {
		return lp, err
	}
	model, err := newSlowModel()
	if err != nil {
		return lp, err
	}
	defer model.close()
	// Four callers, so that no caller's task quota (a share of the store)
	// stops the sends before the memory does.
	tokens := []string{"pod-caller-0-0123456789", "pod-caller-1-0123456789", "pod-caller-2-0123456789", "pod-caller-3-0123456789"}
	var lines []byte
	for i, tok := range tokens {
		lines = fmt.Appendf(lines, "%s peer caller-%d\n", tok, i)
	}
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, lines, 0o600); err != nil {
		return lp, err
	}
	srv, err := startServe(ctx, wrapped, []string{"--intelligence", model.url(), "--model", "bench", "--bearer-tokens-file", tokensFile}, logw)
	if err != nil {
		return lp, err
	}
	defer srv.stop()
	var peakWS atomic.Uint64
	quit, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if ws := cg.WorkingSet(); ws > peakWS.Load() {
				peakWS.Store(ws)
			}
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	c := &http.Client{}
	text, _ := json.Marshal(markLeaf + " " + model.pad)
	// Every run is sent once; those answered 429 are sent again after the
	// Retry-After, as a caller honouring it would, until a pass takes none.
	pending := make([]int, cfg.LivePodRuns)
	for i := range pending {
		pending[i] = i
	}
	for pass := 0; len(pending) > 0 && pass < livePodPasses; pass++ {
		var shed []int
		retry := time.Second
		for _, i := range pending {
			body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"pod-%d","role":"user","parts":[{"kind":"text","text":%s}]}}}`, i+1, i, text)
			b, status, after, err := postAs(ctx, c, srv.url, tokens[i%len(tokens)], body)
			switch {
			case err != nil:
				close(quit)
				return lp, err
			case status == http.StatusTooManyRequests:
				shed = append(shed, i)
				if d, err := strconv.Atoi(after); err == nil && d > 0 {
					retry = time.Duration(d) * time.Second
				}
			case status == http.StatusOK && bytes.Contains(b, []byte(`"state":"`)):
				lp.Accepted++
			default:
				close(quit)
				return lp, fmt.Errorf("pod send %d: HTTP %d: %.300s", i, status, b)
			}
		}
		if pass == 0 {
			lp.Shed = len(shed)
		}
		if len(shed) == len(pending) && pass > 0 {
			break // a pass took none: the pod is full
		}
		pending = shed
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
				close(quit)
				return lp, ctx.Err()
			case <-time.After(retry):
			}
		}
	}
	lp.Unsent = len(pending)
	// Full: the number held stays put for livePodSettle (the gate admits
	// queued runs at each sample while the memory leaves room).
	last, since := int64(-1), time.Now()
	err = poll(ctx, 10*time.Minute, 100*time.Millisecond, "the pod full", func() bool {
		if h := model.held.Load(); h != last {
			last, since = h, time.Now()
		}
		return time.Since(since) >= livePodSettle
	})
	if err != nil {
		close(quit)
		<-sampled
		return lp, err
	}
	lp.Held = int(model.held.Load())
	lp.Working, lp.PeakWS, lp.Peak = float64(cg.WorkingSet()), float64(peakWS.Load()), float64(cg.Peak())
	lp.AtLimit, lp.OOMKills = cg.AtLimit(), cg.OOMKills()
	lp.Processes = srv.children()
	anon, file, kernel := cg.Breakdown()
	lp.Anon, lp.File, lp.Kernel = float64(anon), float64(file), float64(kernel)
	// Their ends: the model answers every held call and every later one,
	// the queued runs start and end too, and the service writes all their
	// results at once while its children exit: the pod must stay under its
	// limit through that burst as well.
	peakWS.Store(0)
	model.releaseAll()
	// Done once no run is left: every accepted run answered, or the
	// service's children down to its pool for livePodSettle (a run that
	// ended otherwise, say stopped for memory, gives no final answer).
	var emptySince time.Time
	err = poll(ctx, 10*time.Minute, 100*time.Millisecond, "every accepted run ended", func() bool {
		if srv.children() > defaultWarmPool {
			emptySince = time.Time{}
			return false
		}
		if emptySince.IsZero() {
			emptySince = time.Now()
		}
		return model.finals.Load() >= int64(lp.Accepted) || time.Since(emptySince) >= livePodSettle
	})
	close(quit)
	<-sampled
	if err != nil {
		return lp, fmt.Errorf("%w (%d of %d runs ended)", err, model.finals.Load(), lp.Accepted)
	}
	lp.Completed = int(model.finals.Load())
	lp.EndPeakWS, lp.EndAtLimit, lp.EndOOMKills = float64(peakWS.Load()), cg.AtLimit(), cg.OOMKills()
	fmt.Fprintf(logw, "bench: live pod: %+v\n", lp)
	return lp, nil
}

// livePodRows is the pod's row.
func livePodRows(rounds []liveRound) []row {
	var pods []livePod
	for _, r := range rounds {
		if r.Pod != nil {
			pods = append(pods, *r.Pod)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	if pods[0].Skipped != "" {
		return []row{{fig: 9, what: "live: in a 1 GiB memory cgroup", other: "not measured: " + pods[0].Skipped}}
	}
	med := func(f func(livePod) float64) float64 {
		v := make([]float64, len(pods))
		for i, p := range pods {
			v[i] = f(p)
		}
		return median(v)
	}
	held := med(func(p livePod) float64 { return float64(p.Held) })
	goal := "goal >= 300: met"
	if held < 300 || float64(pods[0].Derived) < 300 {
		goal = "goal >= 300 (held and derived): missed"
	}
	var ooms, atLimit, endOOMs, endAtLimit uint64
	for _, p := range pods {
		ooms, atLimit = ooms+p.OOMKills, atLimit+p.AtLimit
		endOOMs, endAtLimit = endOOMs+p.EndOOMKills, endAtLimit+p.EndAtLimit
	}
	if ooms > 0 || endOOMs > 0 {
		goal += "; but OOM kills: missed"
	}
	return []row{{fig: 9,
		what: fmt.Sprintf("live: in a 1 GiB memory cgroup (default warm pool of %d, derived bounds, %d runs of figure 9's sent at once)", pods[0].DefPool, pods[0].Sent),
		other: fmt.Sprintf("%.0f subagents held in a model call (derived bound %d, ceiling %d); %.0f accepted, %.0f shed 429 on the first pass, %.0f still when sends again after Retry-After took none; working set %s, its peak %s; the charge with the page cache (reclaimed first) at the limit %d times, %d OOM kills",
			held, pods[0].Derived, pods[0].Ceiling, med(func(p livePod) float64 { return float64(p.Accepted) }), med(func(p livePod) float64 { return float64(p.Shed) }), med(func(p livePod) float64 { return float64(p.Unsent) }),
			fmtMiB(med(func(p livePod) float64 { return p.Working })), fmtMiB(med(func(p livePod) float64 { return p.PeakWS })), atLimit, ooms) +
			fmt.Sprintf("; when full: anonymous %s, page cache %s, kernel %s; %.0f KiB a held subagent all in",
				fmtMiB(med(func(p livePod) float64 { return p.Anon })), fmtMiB(med(func(p livePod) float64 { return p.File })), fmtMiB(med(func(p livePod) float64 { return p.Kernel })),
				med(func(p livePod) float64 { return p.Working / max(float64(p.Held), 1) })/1024) +
			fmt.Sprintf("; through their ends (%.0f runs completed, the queued ones too): working set peak %s, the charge at the limit %d times, %d OOM kills",
				med(func(p livePod) float64 { return float64(p.Completed) }), fmtMiB(med(func(p livePod) float64 { return p.EndPeakWS })), endAtLimit, endOOMs),
		ratio: goal,
	}}
}

// postAs is post with a bearer token; it also returns the Retry-After.
func postAs(ctx context.Context, c *http.Client, url, token string, body []byte) ([]byte, int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, resp.Header.Get("Retry-After"), err
}
