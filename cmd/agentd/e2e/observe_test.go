package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/otlptest"
	"github.com/agentd/agentd/internal/testkit"
)

// metricsURL is the --metrics-addr listener the service logged.
func (s *service) metricsURL(t *testing.T) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
	for sc.Scan() {
		var rec struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "metrics listening" {
			return "http://" + rec.Listen + "/metrics"
		}
	}
	t.Fatalf("no metrics listener in the log:\n%s", s.logs.String())
	return ""
}

// scrape reads the metrics listener: every series line and its value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// One trace spans a whole delegation: agentd A's request, its supervisor, its
// local children (exporting their own spans), the peer call to agentd B, B's
// request, supervisor and child. Every span shares one trace id, and the
// parent links form one tree with no orphan. Not parallel: t.Setenv sets the
// test process's environment, which every agentd another test starts would
// inherit.
func TestOneTraceAcrossTreeAndMesh(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, "[default]\nusage 10 5\nanswer \"B did {objective}\"\n"))
	a := startService(t, "--peer", "b="+b.url, "--intelligence", "builtin:script="+writeScript(t, `
[path 0]
spawn sync "local job"
spawn sync "remote job" provider=peer:b
answer "joined:\n{results}"

[default]
usage 7 3
answer "{path} did {objective}"
`))
	task := sendWithMeta(t, a, "go", nil)
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "joined:\n0.1 did local job\nB did remote job" {
		t.Fatalf("task %s %q", task.Status.State, artifactText(task))
	}
	// A drain flushes each supervisor's spans; every child flushed its own
	// before its result.
	a.stop(t)
	b.stop(t)

	spans := rcv.Spans()
	if errs := rcv.Errs(); len(errs) > 0 {
		t.Fatalf("undecodable exports: %v", errs)
	}
	dump := otlptest.Dump(spans)
	if bad := otlptest.Tree(spans); len(bad) > 0 {
		t.Fatalf("not one tree:\n%s\nspans:\n%s", strings.Join(bad, "\n"), dump)
	}
	count := map[string]int{}
	pids := map[string]bool{}
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		count[s.Name]++
		pids[s.Attrs["resource.process.pid"]] = true
		byID[s.SpanID] = s
	}
	// A's request, delegation, three spawns (root, local child, remote
	// child); B's request (A calls B in A2A 1.0), delegation and spawn;
	// three child runs.
	for name, min := range map[string]int{
		"message/send": 1, "SendMessage": 1, "agentd.delegate": 2, "agentd.spawn": 4, "agentd.run": 3,
		"a2a.delegate peer:b": 1, "tool/call subagent.spawn": 2, "execute_tool subagent.spawn": 2, "chat builtin:script": 5,
	} {
		if count[name] < min {
			t.Errorf("%d %q spans, want at least %d", count[name], name, min)
		}
	}
	// Five processes exported: two supervisors and three children.
	if len(pids) != 5 {
		t.Errorf("spans from %d processes, want 5 (A, A's two children, B, B's child)", len(pids))
	}
	// B's request is a child of A's peer call.
	crossed := false
	for _, s := range spans {
		if s.Name == "SendMessage" && byID[s.ParentSpanID].Name == "a2a.delegate peer:b" {
			crossed = true
		}
	}
	if !crossed {
		t.Errorf("no request span on B under A's peer call")
	}
	// Every log line about a run, the supervisor's and the forwarded
	// children's, carries the trace and the span it belongs to.
	traceID := spans[0].TraceID
	for _, s := range []*service{a, b} {
		lines := 0
		sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["run_id"] == nil {
				continue
			}
			lines++
			if rec["trace_id"] != traceID || rec["span_id"] == nil || rec["span_id"] == "" {
				t.Errorf("log line without its trace: %s", sc.Text())
			}
		}
		if lines < 3 {
			t.Errorf("%d log lines with a run_id, want several", lines)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("spans:\n%s", dump)
	}
}

// A scripted run, then a scrape of --metrics-addr: spawns by provider,
// refusals by reason, tokens in and out, tasks by state, A2A requests by
// method and code.
func TestMetricsAfterScriptedRun(t *testing.T) {
	t.Parallel()
	a := startService(t, "--metrics-addr", "127.0.0.1:0", "--max-depth", "1", "--max-children", "2",
		"--intelligence", "builtin:script="+writeScript(t, `
[path 0]
usage 10 1
spawn sync ""
usage 10 1
spawn sync "wide" scope=fs/read
usage 10 1
spawn sync "one"
usage 10 1
spawn sync "two"
usage 10 1
spawn sync "three"
usage 10 1
answer "{results}"

[depth 1]
usage 100 20
spawn sync "deeper"
usage 100 20
answer "{path}"
`))
	url := a.metricsURL(t)
	task := sendWithMeta(t, a, "go", nil)
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "0.1\n0.2" {
		t.Fatalf("task %s %q", task.Status.State, artifactText(task))
	}
	// The task completes at its root's result; the root's node ends at its
	// reap, which follows.
	var m map[string]float64
	testkit.WaitFor(t, 10*time.Second, "the root reaped", func() bool {
		m = scrape(t, url)
		v, ok := m[`agent_subagents_live{state="running"}`]
		return ok && v == 0
	})
	want := map[string]float64{
		`agent_spawns_total{provider="local"}`:                            3, // the root and two children
		`agent_spawn_refusals_total{reason="missing_objective"}`:          1,
		`agent_spawn_refusals_total{reason="scope_widens"}`:               1,
		`agent_spawn_refusals_total{reason="max_children"}`:               1,
		`agent_spawn_refusals_total{reason="max_depth"}`:                  2,
		`agent_spawn_refusals_total{reason="spawn_rate"}`:                 0,
		`agent_tokens_total{direction="in"}`:                              6*10 + 2*2*100,
		`agent_tokens_total{direction="out"}`:                             6*1 + 2*2*20,
		`agent_tasks{state="completed"}`:                                  3,
		`agent_a2a_requests_total{code="ok",method="message/send"}`:       1,
		`agent_a2a_request_duration_seconds_count{method="message/send"}`: 1,
		`agent_subagents_live{state="running"}`:                           0,
		`agent_governor_breakers_open`:                                    0,
		`agent_kill_ladder_rungs_total{rung="sigkill"}`:                   0,
	}
	for series, v := range want {
		if got, ok := m[series]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
		}
	}
	for series := range m {
		name, _, _ := strings.Cut(series, "{")
		if !strings.HasPrefix(name, "agent_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("series %s is not an agent_ metric", series)
		}
		if strings.Contains(series, string(task.ID)) || strings.Contains(series, "pid=") {
			t.Errorf("series %s has an unbounded label", series)
		}
	}
	// The main listener serves /metrics to operators only: in development
	// mode the local user is the operator (docs/security.md), and a request
	// a page of another origin makes is an anonymous peer's.
	for _, c := range []struct {
		site string
		want int
	}{{"", http.StatusOK}, {"cross-site", http.StatusForbidden}} {
		req, _ := http.NewRequest(http.MethodGet, a.url+"/metrics", nil)
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("main listener /metrics (Sec-Fetch-Site %q): %s, want %d", c.site, resp.Status, c.want)
		}
	}
}

// /healthz is the supervisor's own heartbeat: it stays healthy while a child
// is stopped with SIGSTOP, through Detector C's verdict and the kill ladder.
func TestHealthzWhileChildStopped(t *testing.T) {
	t.Parallel()
	a := startService(t, "--intelligence", "builtin:wait", "--metrics-addr", "127.0.0.1:0",
		"--heartbeat", "50ms", "--ping-interval", "100ms", "--ping-miss", "5")
	url := a.metricsURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.client(t).SendMessage(ctx, nonBlocking(textMessage("wait"))); err != nil {
		t.Fatal(err)
	}
	var kids []int
	testkit.WaitFor(t, 10*time.Second, "a child", func() bool { kids = testkit.Children(a.cmd.Process.Pid); return len(kids) == 1 })
	pid := kids[0]
	testkit.WaitFor(t, 10*time.Second, "pongs", func() bool { return scrape(t, url)["agent_pongs_total"] >= 2 })
	healthy := func() bool {
		resp, err := http.Get(a.url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !healthy() {
		t.Fatal("unhealthy before the child stopped")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the child stopped", func() bool { return testkit.Stopped(pid) || !testkit.Alive(pid) })
	checks := 0
	testkit.WaitFor(t, 20*time.Second, "the stopped child killed", func() bool {
		if !testkit.Alive(pid) {
			return true
		}
		if !healthy() {
			t.Fatalf("/healthz failed while child %d is stopped", pid)
		}
		checks++
		return false
	})
	if !healthy() {
		t.Fatal("unhealthy after the stopped child was killed")
	}
	m := scrape(t, url)
	if m[`agent_detector_verdicts_total{cause="pong_timeout"}`] != 1 || m[`agent_kill_ladder_rungs_total{rung="sigkill"}`] < 1 {
		t.Fatalf("verdicts and rungs after the kill: %v", m)
	}
	if age := m["agent_heartbeat_age_seconds"]; age > 1 {
		t.Errorf("heartbeat %vs old", age)
	}
	t.Logf("%d /healthz checks while the child was stopped", checks)
}

// Bad observability settings exit 2 naming the setting, before anything
// starts.
func TestObservabilityBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"serve", "--metrics-addr", "no-port"}, "", "--metrics-addr"},
		{[]string{"serve", "--heartbeat", "0s"}, "", "--heartbeat"},
		{[]string{"serve"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{[]string{"run", "--instruction", "x"}, "OTEL_TRACES_EXPORTER=zipkin", "OTEL_TRACES_EXPORTER"},
		{[]string{"serve"}, "OTEL_EXPORTER_OTLP_CERTIFICATE=/nonexistent/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE"},
	} {
		wantUsageError(t, tc.env, tc.name, tc.args...)
	}
}
