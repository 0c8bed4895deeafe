package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// historyScript makes every task a nested tree: the root spawns two
// children, the first of which spawns a grandchild and waits for it.
const historyScript = `
[depth 0]
usage 100 20
spawn async "child A"
spawn async "child B"
await
usage 50 10
answer "joined:\n{results}"

[path 0.1]
spawn sync "grandchild"
usage 30 5
answer "A done"

[path 0.2]
usage 20 4
answer "B done"

[path 0.1.1]
usage 10 2
sleep 300ms
answer "grandchild done"
`

// shoot saves a PNG of the page (or of the element sel, when set) as name
// in $AGENTD_CONSOLE_SHOT_DIR (docs/img refreshes them), else in a temp
// directory.
func shoot(t *testing.T, b *browser, name, sel string) {
	t.Helper()
	var png []byte
	var err error
	if sel == "" {
		png, err = chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	} else {
		png, err = chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("AGENTD_CONSOLE_SHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// setValue sets a form control's value (a select's too) as typing would.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	b, _ := json.Marshal(v)
	return chromedp.Evaluate[chromedp.Void](`document.querySelector(` + strconv.Quote(sel) + `).value = ` + string(b))
}

// TestConsoleHistoryAndTaskPage drives the history and a task's page in
// real chromium against the real binary (SQLite store) running nested
// trees: the history lists the stored tasks newest first with their start,
// duration, tokens and status, filters them (by text, state, hostile text
// that matches nothing), pages them; a task's page opens by its URL, draws
// the tree's timeline (one bar per subagent, nested by path) and each
// subagent's steps from the store (model calls with tokens, duration and
// endpoint; spawns and awaits with their arguments and results; the
// distillate), the objective with its line breaks; a reload keeps it; an
// unknown task's page says so. Screenshots of the three go to
// $AGENTD_CONSOLE_SHOT_DIR.
func TestConsoleHistoryAndTaskPage(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	script := filepath.Join(t.TempDir(), "tree.txt")
	if err := os.WriteFile(script, []byte(historyScript), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "--intelligence", "builtin:script="+script)
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}},
	}); err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, obj := range []string{"tally the invoices", "first line of the report\nsecond line: summarize it", "check the mirrors"} {
		r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams(obj, true), nil)
		if err != nil || r.Error != nil {
			t.Fatalf("message/send: %v %+v", err, r.Error)
		}
		var task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		json.Unmarshal(r.Result, &task)
		if task.Status.State != "completed" {
			t.Fatalf("task %s: %s", task.ID, r.Result)
		}
		roots = append(roots, task.ID)
	}
	report := roots[1]

	// The history: every stored task (the roots and their nested tasks).
	b.do(t, "open the history", chromedp.Navigate(s.url+"/ui/#history"))
	b.wait(t, "the history lists", `document.querySelectorAll("#history tbody tr").length === 12`)
	first := evalJS[string](t, b, `document.querySelector("#history tbody tr").innerText`)
	if !strings.Contains(first, "completed") || !strings.Contains(first, "(anonymous)") {
		t.Errorf("the newest row %q", first)
	}
	rootRow := evalJS[[]string](t, b, `[...document.querySelector('#history tbody tr[data-task-id="`+report+`"]').cells].map(c => c.innerText)`)
	if len(rootRow) != 7 || !strings.Contains(rootRow[1], "first line of the report\nsecond line") || rootRow[3] == "" || rootRow[4] == "" || !regexp.MustCompile(`^[1-9]\d*$`).MatchString(rootRow[5]) {
		t.Errorf("the report's row: %q", rootRow)
	}
	shoot(t, b, "console-history.png", "")
	// Filters: a word of an objective; then a state; hostile text.
	b.do(t, "search", setValue("#f-q", "SUMMARIZE"), chromedp.Click(chromedp.CSS("#f-apply")))
	b.wait(t, "one task matches", `document.querySelectorAll("#history tbody tr").length === 1 &&
		document.querySelector("#history tbody tr").dataset.taskId === "`+report+`"`)
	for _, hostile := range []string{`' OR 1=1 --`, `%`, `<img src=x onerror=alert(1)>`, strings.Repeat("é", 200)} {
		b.do(t, "search hostile text", setValue("#f-q", hostile), chromedp.Click(chromedp.CSS("#f-apply")))
		b.wait(t, "nothing matches "+hostile, `document.getElementById("history").hidden &&
			document.getElementById("history-status").innerText === "No stored task matches."`)
	}
	b.do(t, "filter by state", setValue("#f-q", ""), setValue("#f-state", "failed"), chromedp.Click(chromedp.CSS("#f-apply")))
	b.wait(t, "no failed task", `document.getElementById("history-status").innerText === "No stored task matches."`)
	b.do(t, "page by 5", setValue("#f-state", ""), setValue("#f-size", "10"), chromedp.Click(chromedp.CSS("#f-apply")))
	b.wait(t, "a page of 10", `document.querySelectorAll("#history tbody tr").length === 10 && !document.getElementById("history-older").disabled`)
	b.do(t, "older", chromedp.Click(chromedp.CSS("#history-older")))
	b.wait(t, "the last 2", `document.querySelectorAll("#history tbody tr").length === 2 && document.getElementById("history-older").disabled &&
		document.getElementById("history-status").innerText.startsWith("Tasks 11–12 of 12")`)

	// A task's page, from its link: the URL is its own.
	b.do(t, "back to the first page", chromedp.Click(chromedp.CSS("#history-newer")))
	b.do(t, "search the report", setValue("#f-q", "summarize"), chromedp.Click(chromedp.CSS("#f-apply")))
	b.wait(t, "one row", `document.querySelectorAll("#history tbody tr").length === 1`)
	b.do(t, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
	b.do(t, "open the task", chromedp.Click(chromedp.CSS(`#history tbody tr a`)))
	checkTaskPage := func(what string) {
		t.Helper()
		b.wait(t, what+": the timeline", `document.querySelectorAll("#timeline .tl-row").length === 4 &&
			[...document.querySelectorAll("#timeline .tl-row")].every(r => r.dataset.status === "completed")`)
		if got := evalJS[string](t, b, `location.pathname`); got != "/ui/tasks/"+url.PathEscape(report) {
			t.Fatalf("%s: the page's URL is %s", what, got)
		}
		labels := evalJS[[]string](t, b, `[...document.querySelectorAll("#timeline .tl-label")].map(e => e.innerText)`)
		if strings.Join(labels, " ") != "0 0.1 0.1.1 0.2" {
			t.Errorf("%s: the timeline's rows %q", what, labels)
		}
		steps := evalJS[string](t, b, `document.getElementById("task-steps").innerText`)
		for _, want := range []string{"model call · step 1", "100 in / 20 out tokens", "builtin:script", "spawn subagent.spawn", "child A",
			"await subagent.await", "grandchild done", "joined:", "ended completed", "distillate"} {
			if !strings.Contains(steps, want) {
				t.Errorf("%s: the steps lack %q:\n%s", what, want, steps)
			}
		}
		obj := evalJS[string](t, b, `document.getElementById("task-objective").innerText`)
		ws := evalJS[string](t, b, `getComputedStyle(document.getElementById("task-objective")).whiteSpace`)
		if obj != "first line of the report\nsecond line: summarize it" || ws != "pre-wrap" {
			t.Errorf("%s: the objective %q drawn %s", what, obj, ws)
		}
		fields := evalJS[string](t, b, `document.getElementById("task-fields").innerText`)
		for _, want := range []string{"completed", "Started", "Duration", `[1-9]\d* \([1-9]\d* in, [1-9]\d* out\)`} {
			if !regexp.MustCompile(want).MatchString(fields) {
				t.Errorf("%s: the fields lack %q: %q", what, want, fields)
			}
		}
		// The children are linked from their parent.
		if n := evalJS[int](t, b, `document.querySelectorAll("#task-steps section.subagent p.sub a").length`); n < 6 {
			t.Errorf("%s: %d links between parents and children", what, n)
		}
	}
	checkTaskPage("opened from the history")
	if !evalJS[bool](t, b, `window.__sameDocument === true`) {
		t.Error("opening a task reloaded the page")
	}
	shoot(t, b, "console-task.png", "")
	shoot(t, b, "console-timeline.png", "#timeline")
	// A reload keeps it.
	b.do(t, "reload", chromedp.Reload())
	checkTaskPage("after a reload")
	// Back goes to the history.
	b.do(t, "back", chromedp.NavigateBack())
	b.wait(t, "the history again", `!document.getElementById("view-history").hidden`)

	// An unknown task's page: a clear page, nothing else.
	b.do(t, "open an unknown task", chromedp.Navigate(s.url+"/ui/tasks/"+url.PathEscape("no-such-task<b>")))
	b.wait(t, "not found", `document.getElementById("task-status").innerText === "No task no-such-task<b> here: it is unknown, expired, or not yours to see." &&
		document.getElementById("task-body").hidden && document.querySelector("b") === null`)

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if strings.Contains(p, "404") && strings.Contains(p, "/ui/api/task") {
			continue // the unknown task's answer, logged by the browser
		}
		t.Errorf("the page reported: %s", p)
	}
}

// TestConsoleTaskPagesAreOperators: the history and a task's page answer
// the operator only, as the rest of the console: a peer (who may read its
// own tasks through tasks/get) gets 403, no credentials 401, for the JSON
// routes and the page; the operator reads a peer's task.
func TestConsoleTaskPagesAreOperators(t *testing.T) {
	t.Parallel()
	s := startOpService(t, "--intelligence", "builtin:demo")
	r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams("one two", true), peerAuth)
	if err != nil || r.Error != nil {
		t.Fatalf("message/send: %v %+v", err, r.Error)
	}
	var task struct {
		ID string `json:"id"`
	}
	json.Unmarshal(r.Result, &task)
	get := func(path string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			body.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, body.String()
	}
	for _, path := range []string{"/ui/api/tasks", "/ui/api/task?id=" + task.ID, "/ui/tasks/" + task.ID} {
		if code, body := get(path, peerAuth); code != 403 || strings.Contains(body, task.ID) {
			t.Errorf("peer: GET %s: %d %q", path, code, body)
		}
		if code, _ := get(path, nil); code != 401 {
			t.Errorf("no credentials: GET %s: %d", path, code)
		}
	}
	code, body := get("/ui/api/task?id="+task.ID, opAuth)
	if code != 200 || !strings.Contains(body, `"caller":"token:peer-token`) && !strings.Contains(body, task.ID) {
		t.Errorf("operator: GET the peer's task: %d %s", code, body)
	}
	code, body = get("/ui/api/tasks?caller="+url.QueryEscape("nobody"), opAuth)
	if code != 200 || !strings.Contains(body, `"tasks":[]`) {
		t.Errorf("operator: GET the history of a caller with none: %d %s", code, body)
	}
	_ = fmt.Sprint
	_ = time.Second
}

// TestConsoleTaskPageLive: a running tree's page follows it without a
// reload: its running subagents' bars grow (striped), and when an operator
// cancels the slow child its bar turns cancelled and the root's completes.
func TestConsoleTaskPageLive(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	script := filepath.Join(t.TempDir(), "tree.txt")
	if err := os.WriteFile(script, []byte(consoleScript), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "--intelligence", "builtin:script="+script)
	r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams("go", false), nil)
	if err != nil || r.Error != nil {
		t.Fatalf("message/send: %v %+v", err, r.Error)
	}
	var root struct {
		ID string `json:"id"`
	}
	json.Unmarshal(r.Result, &root)
	b.do(t, "open the running task's page", chromedp.Navigate(s.url+"/ui/tasks/"+root.ID))
	b.wait(t, "the tree runs", `document.querySelectorAll("#timeline .tl-row").length === 3 &&
		document.querySelectorAll("#timeline .tl-bar.live").length >= 2 &&
		document.getElementById("task-status").innerText === "Running: the page follows it live."`)
	b.do(t, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
	b.wait(t, "the quick child ends live", `[...document.querySelectorAll("#timeline .tl-row")].some(r => r.innerText.startsWith("0.1") && r.dataset.status === "completed")`)
	slow := evalJS[string](t, b, `[...document.querySelectorAll("#timeline .tl-row")].find(r => r.innerText.startsWith("0.2")).dataset.taskId`)
	w0 := evalJS[float64](t, b, `document.querySelector('#timeline .tl-row[data-task-id="`+slow+`"] .tl-bar').getBoundingClientRect().width`)
	b.wait(t, "the slow child's bar grows", `document.querySelector('#timeline .tl-row[data-task-id="`+slow+`"] .tl-bar').getBoundingClientRect().width > `+strconv.FormatFloat(w0, 'f', 2, 64)+` ||
		document.querySelector('#timeline .tl-row[data-task-id="`+slow+`"] .tl-bar').style.width === "100%"`)
	if r, err := callRPC(t, http.DefaultClient, s.url, "a2a.Cancel", map[string]any{"handle": slow, "reason": "test"}, nil); err != nil || r.Error != nil {
		t.Fatalf("a2a.Cancel: %v %+v", err, r.Error)
	}
	b.wait(t, "the tree ends live", `document.querySelector('#timeline .tl-row[data-task-id="`+slow+`"]').dataset.status === "cancelled" &&
		document.querySelector("#timeline .tl-row").dataset.status === "completed" && document.querySelectorAll("#timeline .tl-bar.live").length === 0 &&
		document.getElementById("task-status").innerText === ""`)
	if !evalJS[bool](t, b, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}
}
