package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
	"github.com/agentd/agentd/internal/testkit"
)

// consoleScript is a tree that stays up long enough to be looked at: the
// root starts a quick child and a slow one and awaits both; the quick one
// answers after a moment, the slow one only after a minute (the test
// cancels it).
const consoleScript = `
[depth 0]
spawn async "count: alpha beta"
spawn async "wait for the operator"
await
answer "joined:\n{results}"

[path 0.1]
usage 120 30
sleep 1200ms
answer "quick child done"

[path 0.2]
usage 80 10
sleep 60s
answer "too late"
`

// chromiumPath finds Debian's chromium. `make test` installs it and sets
// AGENTD_REQUIRE_CHROMIUM=1, so there a missing browser fails the test; a
// plain `go test` skips it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AGENTD_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("chromium is not installed (make test-deps installs it: apt-get install -y chromium, as root)")
	}
	t.Skip("chromium is not installed; `make test` installs it (set AGENTD_REQUIRE_CHROMIUM=1 to fail instead)")
	return ""
}

// browserProcesses returns the pids of the processes started with dir as
// their --user-data-dir: the browser and every helper it forked.
func browserProcesses(dir string) []int {
	want := []byte("--user-data-dir=" + dir)
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			if bytes.Equal(arg, want) && testkit.Alive(pid) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// browser is a headless chromium for one test, with what the page did:
// every request it made, and every exception and error it logged.
type browser struct {
	ctx context.Context

	mu       sync.Mutex // guards requests, problems
	requests []string
	problems []string
}

// startBrowser starts headless chromium with a fresh profile and the flags
// this machine needs (without the background-networking ones its
// connections are refused and it stalls). At cleanup it is stopped and no
// process of it may be left.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	profile, err := os.MkdirTemp("", "agentd-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	var out testkit.Buffer
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1180, 760),
		chromedp.CombinedOutput(&out),
	)
	ctx, cancelTab := chromedp.NewContext(alloc)
	b := &browser{ctx: ctx}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		// No chromium process outlives the test.
		deadline := time.Now().Add(10 * time.Second)
		for left := browserProcesses(profile); len(left) > 0; left = browserProcesses(profile) {
			if time.Now().After(deadline) {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Errorf("chromium processes %v outlived the test", left)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for range 50 { // helpers may still write in the profile for a moment
			if os.RemoveAll(profile) == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if t.Failed() {
			t.Logf("chromium output:\n%s", out.String())
		}
	})
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, e.Request.URL)
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+e.ExceptionDetails.Text+" "+describeException(e))
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Source == log.EntrySourceSecurity {
				b.problems = append(b.problems, fmt.Sprintf("%s %s: %s (%s)", e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				b.problems = append(b.problems, "console.error")
			}
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

func describeException(e *runtime.EventExceptionThrown) string {
	if e.ExceptionDetails.Exception != nil {
		return e.ExceptionDetails.Exception.Description
	}
	return ""
}

func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wait polls a JavaScript condition in the page until it holds.
func (b *browser) wait(t *testing.T, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		t.Fatalf("%s: %v\npage:\n%s", what, err, page)
	}
}

func evalJS[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// TestConsoleInChromium drives the console in a real headless chromium
// against the real binary running a real tree (development mode: the local
// user is the operator): the tree renders with every column, a child's end
// shows live without a reload, a task's detail shows its artifact, the
// cancel control (through its confirmation, from the keyboard too) ends the
// subtree, the page loads nothing but its own origin and logs no error (its
// CSP holds), and a screenshot is written.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	script := filepath.Join(t.TempDir(), "tree.txt")
	if err := os.WriteFile(script, []byte(consoleScript), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "--intelligence", "builtin:script="+script)
	// No animation: the screenshot shows the page at rest.
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}},
	}); err != nil {
		t.Fatal(err)
	}
	page := s.url + "/ui/"
	b.do(t, "open the console", chromedp.Navigate(page))
	b.wait(t, "the stream is live", `document.getElementById("conn").classList.contains("live")`)
	b.do(t, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))

	// A tree: the root and its two children render.
	r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams("go", false), nil)
	if err != nil || r.Error != nil {
		t.Fatalf("message/send: %v %+v", err, r.Error)
	}
	var root struct {
		ID string `json:"id"`
	}
	json.Unmarshal(r.Result, &root)
	b.wait(t, "the tree renders", `document.querySelectorAll("#trees tbody tr").length === 3 &&
		[...document.querySelectorAll("#trees tbody tr")].every(tr => tr.dataset.status === "running")`)
	rows := evalJS[[]string](t, b, `[...document.querySelectorAll("#trees tbody tr")].map(tr => tr.innerText.replace(/\s+/g, " "))`)
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "0 go running") || !strings.Contains(rows[1], "0.1") || !strings.Contains(rows[2], "0.2") {
		t.Fatalf("rows %q", rows)
	}
	for _, row := range rows {
		// status, detectors, provider, depth, tokens of grant, deadline
		// left, pid, task id, actions
		if !strings.Contains(row, "local") || !strings.Contains(row, " / ") || !strings.Contains(row, "Details Cancel subtree") ||
			!(strings.Contains(row, "m ") || strings.Contains(row, "s ")) {
			t.Errorf("row %q lacks a column", row)
		}
	}
	b.wait(t, "the detectors' view", `[...document.querySelectorAll("#trees tbody tr")].some(tr => /healthy|busy/.test(tr.cells[2].innerText))`)
	slowID := evalJS[string](t, b, `document.querySelectorAll("#trees tbody tr")[2].dataset.taskId`)
	slowPID, _ := strconv.Atoi(evalJS[string](t, b, `document.querySelectorAll("#trees tbody tr")[2].cells[7].innerText`))
	if slowPID <= 0 || !testkit.Alive(slowPID) {
		t.Fatalf("the slow child's pid %d as shown is not a live process", slowPID)
	}
	gauges := evalJS[string](t, b, `document.getElementById("gauges").innerText`)
	// Admission's gauges against their bounds, then the service's.
	for _, g := range []string{`live runs\n1 / \d+`, `live processes\n[1-3] / \d+`, `admission queue\n0 / \d+`,
		`live subagents\n[1-3]\n`, `tasks in flight\n[1-3]\n`, `task store\n3 / 10000`, `breakers open\n0`} {
		if !regexp.MustCompile(g).MatchString(gauges) {
			t.Errorf("gauges lack %q: %q", g, gauges)
		}
	}

	// Live: the quick child ends and moves to "ended lately", with no reload.
	b.wait(t, "the quick child's end shows live", `document.querySelectorAll("#trees tbody tr").length === 2 &&
		[...document.querySelectorAll("#ended tbody tr")].some(tr => tr.dataset.status === "completed" && tr.innerText.startsWith("0.1"))`)
	if !evalJS[bool](t, b, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}
	// A task's detail: the quick child's artifact.
	b.do(t, "open the quick child's detail", chromedp.Click(chromedp.CSS(`#ended tbody tr button[data-action="details"]`)))
	b.wait(t, "the detail shows the artifact", `!document.getElementById("detail").hidden &&
		document.getElementById("detail-artifacts").innerText.includes("quick child done") &&
		document.getElementById("detail-fields").innerText.includes("completed")`)

	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("AGENTD_CONSOLE_SHOT_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	shotPath := filepath.Join(dir, fmt.Sprintf("agentd-console-%d.png", time.Now().UnixNano()))
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shotPath, len(shot))

	// The cancel control from the keyboard: Enter opens the confirmation
	// with the focus on "Keep it"; Escape keeps the subtree.
	cancelSel := `#trees tbody tr[data-task-id="` + slowID + `"] button[data-action="cancel"]`
	b.do(t, "focus the cancel control", chromedp.Focus(chromedp.CSS(cancelSel)))
	b.do(t, "press Enter", chromedp.KeyEvent(kb.Enter))
	b.wait(t, "the confirmation opens", `document.getElementById("confirm").open && document.activeElement.id === "confirm-keep"`)
	b.do(t, "press Escape", chromedp.KeyEvent(kb.Escape))
	b.wait(t, "the confirmation closes", `!document.getElementById("confirm").open`)
	if !testkit.Alive(slowPID) {
		t.Fatal("Escape cancelled the subtree")
	}
	// Confirmed, it ends the subtree: the child is cancelled and its process
	// is gone; the root then completes.
	b.do(t, "click cancel", chromedp.Click(chromedp.CSS(cancelSel)))
	b.wait(t, "the confirmation opens", `document.getElementById("confirm").open`)
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait(t, "the subtree ends", `[...document.querySelectorAll("#ended tbody tr")].some(tr => tr.dataset.taskId === "`+slowID+`" && tr.dataset.status === "cancelled")`)
	testkit.WaitFor(t, 10*time.Second, "the cancelled child's process gone", func() bool { return !testkit.Alive(slowPID) })
	b.wait(t, "the whole tree ends", `document.querySelectorAll("#trees tbody tr").length === 0 && !document.getElementById("trees-empty").hidden`)
	if info := evalJS[string](t, b, `document.getElementById("info").innerText`); !strings.Contains(info, "Cancelled the subtree of 0.2") {
		t.Errorf("the page told %q", info)
	}
	// The console's cancel is an operator action of the audit trail: the
	// audit panel lists it from the service's store, with its target.
	b.do(t, "open the audit", chromedp.Click(chromedp.ID("nav-audit")))
	b.wait(t, "the audit lists the cancel", `[...document.querySelectorAll("#audit tbody tr")].some(tr =>
		tr.dataset.method === "a2a.Cancel" && tr.dataset.outcome === "ok" && tr.cells[3].innerText === "`+slowID+`")`)
	testkit.WaitFor(t, 10*time.Second, "the root task completed", func() bool {
		r, err := callRPC(t, http.DefaultClient, s.url, "tasks/get", map[string]any{"id": root.ID}, nil)
		return err == nil && r.Error == nil && strings.Contains(string(r.Result), `"state":"completed"`)
	})

	// Nothing but the service's own origin, and nothing went wrong.
	b.mu.Lock()
	defer b.mu.Unlock()
	base, _ := url.Parse(s.url)
	for _, req := range b.requests {
		u, err := url.Parse(req)
		if err != nil || u.Host != base.Host || u.Scheme != base.Scheme {
			t.Errorf("the page requested %s, outside %s", req, s.url)
		}
	}
	if len(b.requests) == 0 {
		t.Error("no request was seen: the network listener is not working")
	}
	for _, p := range b.problems {
		t.Errorf("the page reported: %s", p)
	}
}

// TestConsoleRefusesNonOperators: the console's page, stream and actions
// answer anyone but the operator as the operator methods do: 403 for the
// page and the stream, -32601 for an a2a.* method; a forged Origin and a
// cross-site Sec-Fetch-Site are refused, in the development mode and with
// tokens.
func TestConsoleRefusesNonOperators(t *testing.T) {
	t.Parallel()
	dev := startService(t, "--intelligence", "builtin:wait")
	host := strings.TrimPrefix(dev.url, "http://")
	_, port, _ := strings.Cut(host, ":")
	get := func(url string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	op := func(url string, hdr map[string]string) (int, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+api.OpCancel+`","params":{"handle":"0"}}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v // a Host header is not taken from Header
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if resp.StatusCode != 200 {
			return resp.StatusCode, 0
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Error != nil {
			return resp.StatusCode, r.Error.Code
		}
		return resp.StatusCode, 0
	}
	for _, c := range []struct {
		name      string
		hdr       map[string]string
		page, rpc int // HTTP statuses
		code      int // JSON-RPC code of a2a.Cancel
	}{
		{"the local operator", nil, 200, 200, 0},
		{"the console's own fetch", map[string]string{"Origin": dev.url, "Sec-Fetch-Site": "same-origin"}, 200, 200, 0},
		{"a forged Origin", map[string]string{"Origin": "http://attacker.example"}, 403, 403, 0},
		{"another local origin", map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, 403, 200, -32601},
		{"a cross-site Sec-Fetch-Site", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, 200, -32601},
		{"a rebound name", map[string]string{"Host": "attacker.example:" + port}, 403, 200, -32601},
	} {
		for _, path := range []string{"/ui/", "/ui/events"} {
			if c.page == 200 && path == "/ui/events" {
				continue // a stream that works does not end: see below
			}
			if got := get(dev.url+path, c.hdr); got != c.page {
				t.Errorf("%s: GET %s: %d, want %d", c.name, path, got, c.page)
			}
		}
		if status, code := op(dev.url, c.hdr); status != c.rpc || code != c.code {
			t.Errorf("%s: a2a.Cancel: HTTP %d code %d, want HTTP %d code %d", c.name, status, code, c.rpc, c.code)
		}
	}

	// With tokens configured there is no local operator: the peer gets 403
	// for the stream, no credentials 401, the operator's token the stream
	// unless the request is cross-site.
	s := startOpService(t, "--intelligence", "builtin:wait")
	if got := get(s.url+"/ui/events", peerAuth); got != 403 {
		t.Errorf("peer token: GET /ui/events %d, want 403", got)
	}
	if got := get(s.url+"/ui/events", nil); got != 401 {
		t.Errorf("no credentials: GET /ui/events %d, want 401", got)
	}
	if got := get(s.url+"/ui/", map[string]string{"Authorization": opAuth["Authorization"], "Sec-Fetch-Site": "cross-site"}); got != 403 {
		t.Errorf("operator token from another site: GET /ui/ %d, want 403", got)
	}
	if status, code := op(s.url, map[string]string{"Authorization": opAuth["Authorization"], "Origin": "http://localhost:1"}); status != 200 || code != -32601 {
		t.Errorf("operator token from another local origin: a2a.Cancel HTTP %d code %d, want -32601", status, code)
	}
	// The operator's token reads the stream: its first snapshot.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/ui/events", nil)
	req.Header.Set("Authorization", opAuth["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || line != "event: snapshot\n" {
		t.Fatalf("operator stream: %s %q %q", resp.Status, resp.Header.Get("Content-Type"), line)
	}
}

// TestLocalCtlAndWatch: after `agentd serve` in the development mode, `agentd
// ctl` works from this machine, and `ctl a2a.Tree --watch` (off a terminal)
// prints a snapshot each time the tree changes: the root appears, then is
// gone and listed as ended after a cancel.
func TestLocalCtlAndWatch(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:wait")
	out, code := runCombined(t, "ctl", "a2a.Tree", "--to", s.url)
	if code != 0 || !strings.Contains(out, "0 live subagents") {
		t.Fatalf("ctl a2a.Tree in the development mode: exit %d\n%s", code, out)
	}
	watch := agentdCommand(t, "ctl", "tree", "--watch", "--to", s.url)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watch.Process.Kill(); watch.Wait() })
	snapshots := make(chan string, 64)
	go func() {
		defer close(snapshots)
		sc := bufio.NewScanner(stdout)
		var cur []string
		for sc.Scan() {
			if sc.Text() == "" && len(cur) > 0 {
				snapshots <- strings.Join(cur, "\n")
				cur = nil
				continue
			}
			cur = append(cur, sc.Text())
		}
		if len(cur) > 0 {
			snapshots <- strings.Join(cur, "\n")
		}
	}()
	next := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case snap, ok := <-snapshots:
				if !ok {
					t.Fatalf("%s: the watch ended", what)
				}
				if cond(snap) {
					return snap
				}
			case <-deadline:
				t.Fatalf("%s: no such snapshot", what)
			}
		}
	}
	next("the empty tree", func(s string) bool { return strings.Contains(s, "0 live subagents") })
	r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams("wait here", false), nil)
	if err != nil || r.Error != nil {
		t.Fatalf("message/send: %v %+v", err, r.Error)
	}
	snap := next("the root running", func(s string) bool {
		return strings.Contains(s, "1 live subagents") && strings.Contains(s, "[running]")
	})
	if !strings.Contains(snap, "tokens 0 of 200000") || !strings.Contains(snap, "task store 1/10000") || !strings.Contains(snap, "admission: runs 1/") {
		t.Errorf("snapshot lacks the grant or the gauges:\n%s", snap)
	}
	out, code = runCombined(t, "ctl", "a2a.Cancel", "--to", s.url)
	if code != 0 || !strings.Contains(out, "cancelled: true") {
		t.Fatalf("ctl a2a.Cancel: exit %d\n%s", code, out)
	}
	next("the root ended", func(s string) bool {
		return strings.Contains(s, "0 live subagents") && strings.Contains(s, "ended lately:") && strings.Contains(s, "[cancelled")
	})

	// On a terminal the watch clears the screen and redraws.
	pty, tty := clitest.OpenPTY(t)
	onTTY := agentdCommand(t, "ctl", "tree", "--watch", "--to", s.url)
	onTTY.Stdout, onTTY.Stderr = tty, tty
	if err := onTTY.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { onTTY.Process.Kill(); onTTY.Wait() })
	screen := readUntil(t, pty, "ended lately:")
	if !strings.HasPrefix(screen, "\x1b[H\x1b[2J") || !strings.Contains(screen, "0 live subagents") {
		t.Fatalf("the watch on a terminal drew %q", screen)
	}
}

// readUntil reads r until what has been read contains want (within 10 s).
func readUntil(t *testing.T, r *os.File, want string) string {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(want)) {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("read until %q: %v after %q", want, err, got)
		}
	}
	return string(got)
}

// TestSendShowsTheTree: off a terminal, `agentd send` prints a line on
// stderr as each child starts and ends, and the result alone on stdout;
// --progress=false prints none.
func TestSendShowsTheTree(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:demo=300ms")
	send := func(args ...string) (string, string) {
		t.Helper()
		cmd := agentdCommand(t, append([]string{"send", "--to", s.url}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("send %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	out, progress := send("first line\nsecond line")
	if !strings.Contains(out, ": completed") || !strings.Contains(out, `"first line" has 2 words`) || strings.Contains(out, "child ") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, want := range []string{"child 0.1 started: first line\n", "child 0.2 started: second line\n", "child 0.1 completed\n", "child 0.2 completed\n"} {
		if !strings.Contains(progress, want) {
			t.Errorf("stderr lacks %q:\n%s", want, progress)
		}
	}
	if strings.Count(progress, "child 0.1 completed") != 1 {
		t.Errorf("a child's end was printed twice:\n%s", progress)
	}
	_, quiet := send("--progress=false", "first line\nsecond line")
	if quiet != "" {
		t.Errorf("--progress=false printed:\n%s", quiet)
	}
	// On a terminal it redraws one row per subagent in place, the root's too.
	pty, tty := clitest.OpenPTY(t)
	cmd := agentdCommand(t, "send", "--to", s.url, "first line\nsecond line")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	screen := readUntil(t, pty, "completed")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("send on a terminal: %v", err)
	}
	screen += readUntilQuiet(pty)
	if !strings.Contains(screen, "\x1b[2K0 ") || !strings.Contains(screen, "\x1b[2K  0.1 ") || !strings.Contains(screen, "F\x1b[2K") {
		t.Errorf("send on a terminal drew %q", screen)
	}
	if !strings.Contains(stdout.String(), `"second line" has 2 words`) {
		t.Errorf("stdout %q", stdout.String())
	}
}

// TestSendStreamOnATerminal: with --stream on a terminal (stdout and stderr
// the same screen), the progress prints a line per change and never moves
// the cursor up over the stream's lines (it drew over its artifact and
// status lines).
func TestSendStreamOnATerminal(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:demo=300ms")
	pty, tty := clitest.OpenPTY(t)
	cmd := agentdCommand(t, "send", "--stream", "--to", s.url, "first line\nsecond line")
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	screen := readUntil(t, pty, "has 2 words")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("send --stream on a terminal: %v", err)
	}
	screen += readUntilQuiet(pty)
	if strings.Contains(screen, "\x1b[") {
		t.Errorf("send --stream on a terminal moved the cursor: %q", screen)
	}
	for _, want := range []string{"status: ", "artifact ", "child 0.1 started"} {
		if !strings.Contains(screen, want) {
			t.Errorf("send --stream on a terminal lacks %q: %q", want, screen)
		}
	}
}

// readUntilQuiet reads what r has left, until a read waits 200 ms.
func readUntilQuiet(r *os.File) string {
	var got []byte
	buf := make([]byte, 4096)
	for {
		r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return string(got)
		}
	}
}

// TestRunOnATerminal: `agentd run` on a terminal shows its result and no
// info lines (it logs at warn); with --log-level info its lines are text, the
// children's forwarded lines among them; off a terminal they are JSON.
func TestRunOnATerminal(t *testing.T) {
	t.Parallel()
	onTTY := func(args ...string) string {
		t.Helper()
		pty, tty := clitest.OpenPTY(t)
		cmd := agentdCommand(t, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		var out bytes.Buffer
		done := make(chan struct{})
		go func() { io.Copy(&out, pty); close(done) }() // ends with EIO when the last writer closes
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run on a terminal: %v", err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the terminal's output did not end")
		}
		return strings.ReplaceAll(out.String(), "\r\n", "\n")
	}
	out := onTTY("run", "first line\nsecond line")
	if !strings.Contains(out, `"first line" has 2 words`) || strings.Contains(out, "level=INFO") || strings.Contains(out, `"level"`) {
		t.Fatalf("run on a terminal:\n%s", out)
	}
	out = onTTY("run", "--log-level", "info", "one two")
	if !strings.Contains(out, "level=INFO msg=\"subagent ended\"") || !regexpChildText.MatchString(out) || strings.Contains(out, `{"time"`) {
		t.Fatalf("run --log-level info on a terminal: not text with the children's lines:\n%s", out)
	}
	piped, code := runCombined(t, "run", "--log-level", "info", "one two")
	if code != 0 || !strings.Contains(piped, `"msg":"subagent ended"`) || !strings.Contains(piped, `"child":true`) {
		t.Fatalf("run off a terminal: not JSON:\n%s", piped)
	}
	forced, code := runCombinedEnv(t, []string{"AGENT_LOG_FORMAT=text"}, "run", "--log-level", "info", "one two")
	if code != 0 || !strings.Contains(forced, "level=INFO") || strings.Contains(forced, `{"time"`) {
		t.Fatalf("AGENT_LOG_FORMAT=text:\n%s", forced)
	}
	wantUsageError(t, "", "--log-format", "run", "--log-format", "xml", "x")
}
