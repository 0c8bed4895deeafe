package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/server/console"
)

// consoleSnapshots reads the console's stream (GET /ui/events) as the
// holder of token until until holds for a snapshot, and returns that one.
func consoleSnapshots(t *testing.T, url, token string, until func(console.Snapshot) bool) console.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /ui/events: %s", resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	var last console.Snapshot
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended (%v) before the snapshot looked for; the last: %+v", err, last.Questions)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev console.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("a snapshot that is not JSON: %v", err)
		}
		last = ev.Snapshot
		if until(last) {
			return last
		}
	}
}

// The console, over plain HTTP: its stream carries the questions tasks wait
// on (with an approval's tool and arguments); the page has the waiting view
// and answers through a2a.Answer; the operator's answer as the page sends
// it (same origin) is taken and audited, the same call from another origin
// is refused as a non-operator's and changes nothing; then the stream shows
// no question.
func TestConsoleShowsAndAnswersQuestions(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\ncall subagent.exec {\"argv\":[\"echo\",\"gated-hello\"]}\nanswer \"{transcript}\"\n")
	s := startAdmService(t, "--intelligence", "builtin:script="+script, "--allow-exec", "--approve", "exec")
	var task wireTask
	if e := rpcAs(t, s.service, floodToken, "message/send", sendParams("run it", false), &task); e != nil {
		t.Fatalf("send: %+v", e)
	}
	snap := consoleSnapshots(t, s.url, opToken, func(s console.Snapshot) bool { return len(s.Questions) > 0 })
	q := snap.Questions[0]
	if q.TaskID != task.ID || q.Tool != api.ToolExec || string(q.Arguments) != `{"argv":["echo","gated-hello"]}` || q.AgentPath != "0" ||
		q.Caller != "token:flood" || !strings.Contains(q.Text, "wants to call subagent.exec") {
		t.Fatalf("the stream's question: %+v", q)
	}

	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+opToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if page := get("/ui/"); !strings.Contains(page, `id="view-waiting"`) || !strings.Contains(page, `href="/ui/#waiting"`) {
		t.Fatal("the page has no waiting view")
	}
	if js := get("/ui/console.js"); !strings.Contains(js, `rpc("a2a.Answer"`) || !strings.Contains(js, `"a2a.Answer", { task_id: id, answer: "yes" }`) {
		t.Fatal("the page's script does not answer through a2a.Answer")
	}

	answer := func(hdr map[string]string, text string) rpcResult {
		t.Helper()
		hdr["Authorization"] = "Bearer " + opToken
		r, err := callRPC(t, http.DefaultClient, s.url, api.OpAnswer, map[string]any{"task_id": task.ID, "answer": text}, hdr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := answer(map[string]string{"Origin": "http://localhost:1", "Sec-Fetch-Site": "cross-site"}, "yes"); r.Error == nil || r.Error.Code != -32601 {
		t.Fatalf("a2a.Answer from another origin: %+v, want -32601 (not an operator's)", r.Error)
	}
	if got := s.stateOf(floodToken, task.ID); got != "input-required" {
		t.Fatalf("after the cross-site answer: %s, want input-required", got)
	}
	if r := answer(map[string]string{"Origin": s.url, "Sec-Fetch-Site": "same-origin"}, "yes"); r.Error != nil {
		t.Fatalf("a2a.Answer as the page sends it: %+v", r.Error)
	}
	consoleSnapshots(t, s.url, opToken, func(s console.Snapshot) bool { return len(s.Questions) == 0 })
	var audit api.AuditResult
	s.call(opToken, api.OpAudit, map[string]any{"method": api.OpAnswer}, &audit)
	if len(audit.Records) != 1 || audit.Records[0].Outcome != "ok" || audit.Records[0].Target != task.ID || audit.Records[0].Caller != "token:admin" {
		t.Fatalf("audit: %+v, want the one answer taken (the cross-site call was not an operator's)", audit.Records)
	}
}

// The console in real chromium (development mode: the local user is the
// operator): a task that waits is marked in the live tree and the history,
// the waiting view shows its approval with the call's arguments, Approve
// (through its confirmation) runs the call; its next question shows with
// its choices, and a choice answered through the form reaches the asker.
func TestConsoleAnswersInChromium(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	script := filepath.Join(t.TempDir(), "ask.txt")
	if err := os.WriteFile(script, []byte("[depth 0]\ncall subagent.exec {\"argv\":[\"echo\",\"gated-hello\"]}\n"+
		"ask \"Which color?\" choices=red,blue\nanswer \"{answer} | {transcript}\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "--intelligence", "builtin:script="+script, "--allow-exec", "--approve", "exec")
	b.do(t, "open the console", chromedp.Navigate(s.url+"/ui/"))
	b.wait(t, "the stream is live", `document.getElementById("conn").classList.contains("live")`)
	r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams("go", false), nil)
	if err != nil || r.Error != nil {
		t.Fatalf("message/send: %v %+v", err, r.Error)
	}
	var task wireTask
	json.Unmarshal(r.Result, &task)

	b.wait(t, "the live tree marks the waiting task", `[...document.querySelectorAll("#trees tbody tr")].some(tr =>
		tr.dataset.taskId === `+jsString(task.ID)+` && tr.cells[1].innerText.includes("input-required"))`)
	b.wait(t, "the nav counts it", `document.getElementById("waiting-count").innerText === "1"`)
	b.do(t, "open the history", chromedp.Navigate(s.url+"/ui/#history"))
	b.wait(t, "the history marks it", `[...document.querySelectorAll("#history tbody tr")].some(tr =>
		tr.dataset.state === "input-required" && tr.querySelector("a.waiting"))`)
	b.do(t, "follow the mark", chromedp.Click(chromedp.CSS(`#history tbody tr a.waiting`)))
	b.wait(t, "the approval shows", `!document.getElementById("view-waiting").hidden &&
		document.querySelector("#questions article[data-kind=approval]") !== null &&
		document.getElementById("questions").innerText.includes("wants to call subagent.exec") &&
		document.getElementById("questions").innerText.includes("gated-hello")`)
	b.do(t, "approve", chromedp.Click(chromedp.CSS(`#questions article[data-kind=approval] button[data-action=approve]`)))
	b.wait(t, "the confirmation", `document.getElementById("confirm").open`)
	b.do(t, "confirm", chromedp.Click(chromedp.CSS(`#confirm-ok`)))

	b.wait(t, "the next question shows", `document.querySelector("#questions article[data-kind=approval]") === null &&
		document.querySelector("#questions article[data-kind=question]") !== null &&
		document.getElementById("questions").innerText.includes("Which color?")`)
	b.do(t, "pick blue", chromedp.Click(chromedp.CSS(`#questions article[data-kind=question] button[data-action=choice]:nth-of-type(2)`)))
	if got := evalJS[string](t, b, `document.querySelector("#questions textarea").value`); got != "blue" {
		t.Fatalf("the choice filled %q", got)
	}
	b.do(t, "answer", chromedp.Click(chromedp.CSS(`#questions article[data-kind=question] button[data-action=answer]`)))
	b.wait(t, "no question left", `document.querySelectorAll("#questions article").length === 0 &&
		!document.getElementById("waiting-empty").hidden && document.getElementById("waiting-count").hidden`)

	var done wireTask
	testkit.WaitFor(t, 20*time.Second, "the task completed", func() bool {
		r, err := callRPC(t, http.DefaultClient, s.url, "tasks/get", map[string]any{"id": task.ID}, nil)
		return err == nil && r.Error == nil && json.Unmarshal(r.Result, &done) == nil && done.Status.State == "completed"
	})
	arts, _ := json.Marshal(done.Artifacts)
	if done.Status.State != "completed" || !strings.Contains(string(arts), "blue | ") || !strings.Contains(string(arts), "gated-hello") {
		t.Fatalf("after the console's answers: %s %s", done.Status.State, arts)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) > 0 {
		t.Fatalf("the page logged problems: %q", b.problems)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
