package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// admService is agentd serve on loopback http with an operator token and two
// peer tokens (two callers).
type admService struct {
	*service
	t *testing.T
}

const (
	floodToken = "flood-token-0123456789"
	otherToken = "other-token-0123456789"
)

func startAdmService(t *testing.T, args ...string) *admService {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	lines := opToken + " operator admin\n" + floodToken + " peer flood\n" + otherToken + " peer other\n"
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	return &admService{service: startService(t, append([]string{"--bearer-tokens-file", tokens, "--drain-grace", "5s"}, args...)...), t: t}
}

// burstClient has room for every connection of a burst.
var burstClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0}}

// sendAnswer is the answer to one non-blocking message/send.
type sendAnswer struct {
	status     int
	retryAfter string
	id, state  string
	position   float64
	errData    map[string]any
}

func (s *admService) sendAs(token string, i int) sendAnswer {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "message/send", "params": sendParams(fmt.Sprintf("wait %d", i), false)})
	return s.post(token, i, body)
}

// post sends one JSON-RPC request body as token and reads the answer.
func (s *admService) post(token string, i int, body []byte) sendAnswer {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := burstClient.Do(req)
	if err != nil {
		s.t.Errorf("send %d: %v", i, err)
		return sendAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Result struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Metadata map[string]any `json:"metadata"`
		} `json:"result"`
		Error *struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		s.t.Errorf("send %d: HTTP %d, body %q", i, resp.StatusCode, b)
		return sendAnswer{status: resp.StatusCode}
	}
	a := sendAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), id: r.Result.ID, state: r.Result.Status.State}
	a.position, _ = r.Result.Metadata["agentd/queue_position"].(float64)
	if r.Error != nil {
		a.errData = r.Error.Data
	}
	return a
}

func (s *admService) call(token, method string, params, out any) {
	s.t.Helper()
	r, err := callRPC(s.t, burstClient, s.url, method, params, map[string]string{"Authorization": "Bearer " + token})
	if err != nil || r.status != 200 || r.Error != nil {
		s.t.Fatalf("%s: %v, HTTP %d, %+v", method, err, r.status, r.Error)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			s.t.Fatalf("%s: %v", method, err)
		}
	}
}

// cancel cancels a task the test is done with; one that has ended already
// (-32002, not cancelable: under a loaded machine the memory policy may
// have stopped its child, which these tests allow) is left as it is.
func (s *admService) cancel(id string) {
	s.t.Helper()
	r, err := callRPC(s.t, burstClient, s.url, "tasks/cancel", map[string]any{"id": id}, map[string]string{"Authorization": "Bearer " + opToken})
	switch {
	case err != nil || r.status != 200:
		s.t.Fatalf("tasks/cancel %s: %v, HTTP %d", id, err, r.status)
	case r.Error != nil && r.Error.Code == -32002:
		s.t.Logf("task %s had ended before its cancel: %s", id, s.stateOf(opToken, id))
	case r.Error != nil:
		s.t.Fatalf("tasks/cancel %s: %+v", id, r.Error)
	}
}

func (s *admService) stateOf(token, id string) string {
	var task struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	s.call(token, "tasks/get", map[string]any{"id": id}, &task)
	return task.Status.State
}

func (s *admService) tree() api.TreeResult {
	var tr api.TreeResult
	s.call(opToken, api.OpTree, nil, &tr)
	return tr
}

// 256 concurrent non-blocking sends from one caller against bounds of 8 runs
// and 8 live subagents: the supervisor never has more than 8 children, 8
// tasks run, the caller's share of the queue (16 of 32) waits submitted with
// its position, and the rest are answered 429 with a retry hint. A second
// caller is not shut out: its task queues, and it is the next to run. Every
// accepted task ends terminal when cancelled, the queued ones without ever
// running.
func TestAdmissionBurstStaysInsideTheBounds(t *testing.T) {
	t.Parallel()
	// The burst opens 256 connections from one address, over the default
	// per-address connection cap (128): raised here, so every send reaches
	// admission, which is what this test measures.
	s := startAdmService(t, "--intelligence", "builtin:wait", "--max-live-runs", "8", "--max-live-subagents", "8", "--queue-capacity", "32",
		"--max-conns-per-addr", "1024")
	pid := s.cmd.Process.Pid
	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(len(testkit.Children(pid))); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	const burst = 256
	answers := make([]sendAnswer, burst)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = s.sendAs(floodToken, i)
		}()
	}
	wg.Wait()
	var accepted []string
	queued, shed := 0, 0
	for i, a := range answers {
		switch a.status {
		case http.StatusOK:
			if a.state != "submitted" && a.state != "working" {
				t.Errorf("send %d: state %q", i, a.state)
			}
			if a.position > 0 {
				queued++
			}
			accepted = append(accepted, a.id)
		case http.StatusTooManyRequests:
			shed++
			secs, err := strconv.Atoi(a.retryAfter)
			if err != nil || secs < 1 || a.errData["retryAfterSeconds"] != float64(secs) || a.errData["reason"] != "caller_queue_full" {
				t.Errorf("send %d: shed with Retry-After %q, error data %v", i, a.retryAfter, a.errData)
			}
		default:
			t.Errorf("send %d: HTTP %d", i, a.status)
		}
	}
	if len(accepted) != 24 || queued != 16 || shed != burst-24 {
		t.Fatalf("%d accepted (%d queued), %d shed; want 8 running, 16 queued and %d shed", len(accepted), queued, shed, burst-24)
	}
	testkit.WaitFor(t, 30*time.Second, "8 tasks running", func() bool {
		a := s.tree().Admission
		return a != nil && a.Runs == 8 && a.LiveProcesses == 8 && a.Queued == 16
	})
	tr := s.tree()
	if a := tr.Admission; a.Slots != 8 || a.Shed["caller_queue_full"] != int64(burst-24) || a.QueuedByPriority["normal"] != 16 {
		t.Fatalf("admission %+v", a)
	}

	// A second caller: queued, first in line (the flood holds its share).
	other := s.sendAs(otherToken, 999)
	if other.status != 200 || other.state != "submitted" || other.position != 1 {
		t.Fatalf("the second caller's send: %+v, want submitted at position 1", other)
	}
	var running, waiting []string
	for _, id := range accepted {
		if s.stateOf(floodToken, id) == "working" {
			running = append(running, id)
		} else {
			waiting = append(waiting, id)
		}
	}
	if len(running) != 8 || len(waiting) != 16 {
		t.Fatalf("%d working, %d waiting", len(running), len(waiting))
	}
	s.call(floodToken, "tasks/cancel", map[string]any{"id": running[0]}, nil)
	testkit.WaitFor(t, 30*time.Second, "the second caller's task running", func() bool { return s.stateOf(otherToken, other.id) == "working" })
	for _, id := range waiting {
		if st := s.stateOf(floodToken, id); st != "submitted" {
			t.Fatalf("a queued flood task is %s after the slot went to the second caller", st)
		}
	}

	// A queued task cancels without running; then everything else.
	var task struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	s.call(floodToken, "tasks/cancel", map[string]any{"id": waiting[0]}, &task)
	if task.Status.State != "canceled" {
		t.Fatalf("a cancelled queued task is %s", task.Status.State)
	}
	for _, id := range append(waiting[1:], running[1:]...) { // the queue first: none of it runs
		s.call(floodToken, "tasks/cancel", map[string]any{"id": id}, nil)
	}
	s.call(otherToken, "tasks/cancel", map[string]any{"id": other.id}, nil)
	for _, id := range accepted {
		if st := s.stateOf(floodToken, id); st != "canceled" {
			t.Errorf("task %s ended %s, want canceled", id, st)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "every child reaped", func() bool { return len(testkit.Children(pid)) == 0 })
	close(stopSampling)
	<-sampled
	if p := peak.Load(); p > 8 {
		t.Fatalf("the supervisor had %d children at once, over the bound of 8", p)
	}
	a := s.tree().Admission
	if a.Runs != 0 || a.Slots != 0 || a.Queued != 0 || a.Admitted != 8+1 || a.Cancelled != 16 {
		t.Fatalf("admission after: %+v", a)
	}
	t.Logf("peak children %d; admitted %d, left the queue unrun %d, shed %v", peak.Load(), a.Admitted, a.Cancelled, a.Shed)
	// The gauges are on /metrics too.
	req, _ := http.NewRequest(http.MethodGet, s.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := burstClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics := readAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"agent_admission_max_live_subagents 8", "agent_admission_max_live_runs 8", "agent_admission_queue_capacity 32",
		`agent_admission_shed_total{reason="caller_queue_full"} 232`, "agent_admission_live_subagents 0", "agent_subagent_processes 0",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// A nested spawn that would pass the service's process bound is refused as
// a tool result, at once: the root (one slot) holds an async child (the
// second), and its next spawn is told so.
func TestAdmissionNestedSpawnRefusedAtCapacity(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[path 0]\nspawn async \"hold\"\nspawn sync \"one too many\"\nanswer \"{transcript}\"\n[default]\nsleep 1m\nanswer \"held\"\n")
	s := startAdmService(t, "--intelligence", "builtin:script="+script, "--max-live-runs", "1", "--max-live-subagents", "2")
	r, err := callRPC(t, burstClient, s.url, "message/send", sendParams("go", true), map[string]string{"Authorization": "Bearer " + floodToken})
	if err != nil || r.Error != nil {
		t.Fatalf("send: %v %+v", err, r.Error)
	}
	var task struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"artifacts"`
	}
	json.Unmarshal(r.Result, &task)
	if task.Status.State != "completed" || len(task.Artifacts) == 0 || len(task.Artifacts[0].Parts) == 0 ||
		!strings.Contains(task.Artifacts[0].Parts[0].Text, "spawn denied: service at capacity") {
		t.Fatalf("task %+v, want completed with the refusal in its transcript", task)
	}
	var c api.CapsResult
	s.call(opToken, api.OpCaps, nil, &c)
	if c.Admission == nil || c.Admission.Refused != 1 {
		t.Fatalf("admission %+v, want one refused nested spawn", c.Admission)
	}
}

// The service's standing trigger is admitted like any caller: with one run
// slot, a loop's run holds it and a peer's message queues; when the loop's run
// is cancelled the peer's task takes the slot, and the loop's next run waits
// its turn in the queue.
func TestAdmissionCountsTheStandingTrigger(t *testing.T) {
	t.Parallel()
	s := startAdmService(t, "--mode", "loop", "--instruction", "wait", "--intelligence", "builtin:wait",
		"--max-live-runs", "1", "--max-live-subagents", "1", "--queue-capacity", "4")
	var loopTask string
	testkit.WaitFor(t, 30*time.Second, "the loop's run holding the slot", func() bool {
		tr := s.tree()
		if tr.Admission == nil || tr.Admission.Runs != 1 || len(tr.Nodes) != 1 || tr.Nodes[0].PID == 0 {
			return false
		}
		loopTask = tr.Nodes[0].TaskID
		return true
	})
	peer := s.sendAs(floodToken, 1)
	if peer.status != 200 || peer.state != "submitted" || peer.position != 1 {
		t.Fatalf("a peer's send while the loop holds the slot: %+v, want submitted at position 1", peer)
	}
	var c api.CancelResult
	s.call(opToken, api.OpCancel, map[string]any{"handle": loopTask}, &c)
	if !c.Cancelled {
		t.Fatalf("cancel of the loop's run: %+v", c)
	}
	testkit.WaitFor(t, 30*time.Second, "the peer's task running", func() bool { return s.stateOf(floodToken, peer.id) == "working" })
	testkit.WaitFor(t, 30*time.Second, "the loop's next run queued", func() bool {
		a := s.tree().Admission
		return a.Runs == 1 && a.Queued == 1
	})
	s.call(floodToken, "tasks/cancel", map[string]any{"id": peer.id}, nil)
	testkit.WaitFor(t, 30*time.Second, "the loop's next run holding the slot", func() bool {
		a := s.tree().Admission
		return a.Runs == 1 && a.Queued == 0 && a.LiveProcesses == 1
	})
}
