package e2e

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// instanceOf is the replica's instance id, from its "task store open" log
// line.
func instanceOf(t *testing.T, s *service) string {
	t.Helper()
	m := regexp.MustCompile(`"msg":"task store open"[^\n]*"instance":"([^"]+)"`).FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatal("no task store open line with the instance")
	}
	return m[1]
}

// sendTo sends a non-blocking message through s and returns its task.
func sendTo(t *testing.T, s *service, text string) *a2a.Task {
	t.Helper()
	res, err := s.client(t).SendMessage(context.Background(), nonBlocking(textMessage(text)))
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return res.(*a2a.Task)
}

// followUpTo sends a follow-up message for task id through s over JSON-RPC
// and returns the error it gets (the detail is in its data).
func followUpTo(t *testing.T, s *service, id a2a.TaskID, msgID string) *rpcError {
	t.Helper()
	body := `{"messageId":"` + msgID + `","taskId":"` + string(id) + `","role":"user","parts":[{"kind":"text","text":"and then?"}]}`
	return rpc(t, s, "", "message/send", `{"message":`+body+`,"configuration":{"blocking":false}}`, nil)
}

// Two replicas share the admission queue in PostgreSQL: with both busy
// (--max-live-runs 1), what A accepts waits in the database, with its
// position; a queued task cancelled through B never runs; when B's slot
// frees, B claims A's queued task and runs it, and a stream opened through
// A follows it to the end. A follow-up for a task A runs, sent to B, is
// forwarded to A; one for a finished task gets the answer A would give.
func TestReplicasShareTheAdmissionQueue(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 2500ms\nanswer \"done: {objective}\"\n")
	// A queue of 6 across the service, 3 of them per caller (every caller
	// here is the same anonymous one).
	a := replica(t, dsn, "--intelligence", "builtin:script="+script, "--max-live-runs", "1", "--queue-capacity", "6")
	b := replica(t, dsn, "--intelligence", "builtin:script="+script, "--max-live-runs", "1", "--queue-capacity", "6", "--metrics-addr", "127.0.0.1:0")
	ctx := context.Background()

	onA := sendTo(t, a, "on A")
	onB := sendTo(t, b, "on B")
	testkit.WaitFor(t, 10*time.Second, "both replicas busy", func() bool {
		return getTask(t, a, onA.ID).Status.State == a2a.TaskStateWorking && getTask(t, a, onB.ID).Status.State == a2a.TaskStateWorking
	})
	q1 := sendTo(t, a, "queued one")
	q2 := sendTo(t, a, "queued two")
	q3 := sendTo(t, a, "queued three")
	// The caller holds its 3 of the shared queue: a fourth through B is
	// shed, and leaves no task.
	resp, body := post(t, b, "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"fourth","role":"user","parts":[{"kind":"text","text":"fourth"}]},"configuration":{"blocking":false}}}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "caller_queue_full") {
		t.Fatalf("a fourth queued run through B: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := len(listAll(t, b)); n != 5 {
		t.Fatalf("%d tasks after the shed one", n)
	}
	// Each replica's gauges show the service's queue (A queued them all).
	for name, s := range map[string]*service{"A": a, "B": b} {
		var tr api.TreeResult
		if e := rpc(t, s, "", api.OpTree, "{}", &tr); e != nil || tr.Admission == nil {
			t.Fatalf("a2a.tree through %s: %+v %+v", name, e, tr)
		}
		if got := tr.Admission; got.Queued != 3 || got.QueuedByPriority["normal"] != 3 {
			t.Fatalf("the admission queue as %s shows it: %d %v, want 3 normal", name, got.Queued, got.QueuedByPriority)
		}
	}
	if m := scrape(t, b.metricsURL(t)); m[`agent_admission_queued{priority="normal"}`] != 3 {
		t.Fatalf("B's agent_admission_queued: %v", m[`agent_admission_queued{priority="normal"}`])
	}
	if q1.Status.State != a2a.TaskStateSubmitted || q1.Metadata["agentd/queue_position"] != float64(1) || q2.Metadata["agentd/queue_position"] != float64(2) {
		t.Fatalf("queued through A: %s %v, %v", q1.Status.State, q1.Metadata, q2.Metadata)
	}
	if got := getTask(t, b, q2.ID); got.Metadata["agentd/queue_position"] != float64(2) {
		t.Fatalf("the second queued task through B: %v", got.Metadata)
	}

	// A stream of the first through A, from the queue to its end.
	// The stream's first event (the queued snapshot) arrives before B's slot
	// frees below, so that the claim cannot overtake the subscription.
	streamed := make(chan []a2a.TaskState, 1)
	subscribed := make(chan struct{})
	go func() {
		var states []a2a.TaskState
		defer func() { streamed <- states }()
		for ev, err := range a.client(t).ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: q1.ID}) {
			if err != nil {
				break
			}
			switch v := ev.(type) {
			case *a2a.Task:
				states = append(states, v.Status.State)
			case *a2a.TaskStatusUpdateEvent:
				states = append(states, v.Status.State)
			}
			if len(states) == 1 {
				close(subscribed)
			}
		}
	}()
	select {
	case <-subscribed:
	case states := <-streamed:
		t.Fatalf("the stream through A ended before its first event: %v", states)
	case <-time.After(10 * time.Second):
		t.Fatal("the stream through A gave no first event")
	}

	// The second, queued by A, cancelled through B: out of the queue, never run.
	cancelled, err := b.client(t).CancelTask(ctx, &a2a.TaskIDParams{ID: q2.ID})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel of a queued task through B: %+v %v", cancelled, err)
	}
	if got := getTask(t, a, q2.ID); got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the cancelled queued task through A: %s", got.Status.State)
	}
	if got := getTask(t, b, q1.ID); got.Status.State != a2a.TaskStateSubmitted || got.Metadata["agentd/queue_position"] != float64(1) {
		t.Fatalf("the first queued task after the cancel: %s %v", got.Status.State, got.Metadata)
	}
	if got := getTask(t, b, q3.ID); got.Metadata["agentd/queue_position"] != float64(2) {
		t.Fatalf("the third queued task after the cancel: %v", got.Metadata)
	}
	// ListTasks through either replica shows the same current places (q3
	// was stored third).
	for name, s := range map[string]*service{"A": a, "B": b} {
		var listed struct {
			Tasks []struct {
				ID       string         `json:"id"`
				Metadata map[string]any `json:"metadata"`
			} `json:"tasks"`
		}
		if e := rpc(t, s, "1.0", "ListTasks", `{"pageSize":100}`, &listed); e != nil {
			t.Fatalf("ListTasks through %s: %+v", name, e)
		}
		places := map[string]any{}
		for _, lt := range listed.Tasks {
			places[lt.ID] = lt.Metadata["agentd/queue_position"]
		}
		if places[string(q1.ID)] != float64(1) || places[string(q3.ID)] != float64(2) {
			t.Fatalf("queue places listed through %s: %v", name, places)
		}
	}
	if e := followUpTo(t, b, q1.ID, "to-the-queued"); e == nil || e.Code != -32004 || !strings.Contains(string(e.Data), "admission queue") {
		t.Fatalf("a follow-up for a queued task: %+v", e)
	}

	// A follow-up through B for the task A runs is forwarded to A, which
	// takes it: it is in the task's history when B answers.
	if e := followUpTo(t, b, onA.ID, "to-a-through-b"); e != nil {
		t.Fatalf("a follow-up through B for A's running task: %+v (A is %s)", e, instanceOf(t, a))
	}
	if got := getTask(t, a, onA.ID); !hasMessageID(got, "to-a-through-b") {
		t.Fatalf("A's task after the follow-up through B: no message to-a-through-b in %+v", got.History)
	}

	// B's slot frees: B claims A's queued task and runs it.
	if _, err := b.client(t).CancelTask(ctx, &a2a.TaskIDParams{ID: onB.ID}); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testkit.WaitFor(t, 10*time.Second, "B claimed A's queued task", func() bool {
		return strings.Contains(b.logs.String(), `"msg":"task claimed from the shared admission queue","task_id":"`+string(q1.ID)+`"`)
	})
	claim := regexp.MustCompile(`"time":"([^"]+)","level":"INFO","msg":"task claimed from the shared admission queue","task_id":"` + string(q1.ID)).FindStringSubmatch(b.logs.String())
	if at, err := time.Parse(time.RFC3339Nano, claim[1]); err == nil {
		t.Logf("B's slot freed (its cancel answered) to B claiming A's queued task: %s", at.Sub(freed))
	}
	var done *a2a.Task
	testkit.WaitFor(t, 15*time.Second, "the claimed task completed", func() bool {
		done = getTask(t, a, q1.ID)
		return done.Status.State.Terminal()
	})
	if done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "done: queued one" {
		t.Fatalf("A's queued task run by B: %s %q", done.Status.State, artifactText(done))
	}
	if _, ok := done.Metadata["agentd/queue_position"]; ok {
		t.Fatalf("a task that ran keeps its queue position: %v", done.Metadata)
	}
	select {
	case states := <-streamed:
		if len(states) < 3 || states[0] != a2a.TaskStateSubmitted || states[len(states)-1] != a2a.TaskStateCompleted {
			t.Fatalf("streamed through A: %v", states)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream through A did not end")
	}
	// The third, claimed by whichever replica freed next, cancelled through
	// the other: the cancel reaches its runner, which stops it.
	var runner, other *service
	testkit.WaitFor(t, 15*time.Second, "the third queued task claimed", func() bool {
		for _, s := range []*service{a, b} {
			if strings.Contains(s.logs.String(), `"msg":"task claimed from the shared admission queue","task_id":"`+string(q3.ID)+`"`) {
				runner = s
			}
		}
		return runner != nil && getTask(t, a, q3.ID).Status.State == a2a.TaskStateWorking
	})
	other = a
	if runner == a {
		other = b
	}
	if c, err := other.client(t).CancelTask(ctx, &a2a.TaskIDParams{ID: q3.ID}); err != nil || c.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel of a claimed task through the other replica: %+v %v", c, err)
	}
	// Runs: A its own, B its own, A's first queued one (B) and the third
	// (either); the cancelled queued one none.
	if na, nb := lineCount(a, "task accepted"), lineCount(b, "task accepted"); na+nb != 4 || nb < 2 {
		t.Fatalf("runs: %d on A, %d on B", na, nb)
	}
	// A follow-up for a finished task through B: the answer A gives.
	ea, eb := followUpTo(t, a, q1.ID, "late-a"), followUpTo(t, b, q1.ID, "late-b")
	if ea == nil || eb == nil || ea.Code != -32004 || eb.Code != ea.Code || !strings.Contains(string(eb.Data), "takes no more messages") {
		t.Fatalf("a follow-up for a finished task: through A %+v, through B %+v", ea, eb)
	}
}

// The replica that claimed a queued task dies: the task is that replica's,
// and the surviving one resolves it by --recover once its lease expires.
func TestReplicasQueueClaimerKilled(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 5s\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script, "--max-live-runs", "1")
	busy := sendTo(t, a, "keeps A busy")
	testkit.WaitFor(t, 10*time.Second, "A busy", func() bool { return getTask(t, a, busy.ID).Status.State == a2a.TaskStateWorking })
	q := sendTo(t, a, "queued")
	if q.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("queued through A: %s", q.Status.State)
	}
	b := replica(t, dsn, "--intelligence", "builtin:script="+script, "--max-live-runs", "1")
	testkit.WaitFor(t, 10*time.Second, "B claimed and runs A's queued task", func() bool {
		return getTask(t, a, q.ID).Status.State == a2a.TaskStateWorking && lineCount(b, "task accepted") == 1
	})
	b.kill(t)
	killed := time.Now()
	var got *a2a.Task
	testkit.WaitFor(t, 10*time.Second, "A resolved the task B claimed", func() bool {
		got = getTask(t, a, q.ID)
		return got.Status.State.Terminal()
	})
	t.Logf("SIGKILL of the claimer to its task resolved by A: %s (lease 1s)", time.Since(killed))
	if got.Status.State != a2a.TaskStateFailed || got.Metadata["agentd/cause"] != "supervisor_lost" {
		t.Fatalf("the claimed task after its claimer died: %s %v", got.Status.State, got.Metadata)
	}
}

// Fencing: A is stopped (SIGSTOP) past its lease while it runs a task; B
// takes the task over and fails it (supervisor_lost). When A comes back
// (SIGCONT), it writes nothing to that task (the database refuses it) and
// stops its tree, once, without ending the task; it goes on serving with its
// lease renewed.
func TestReplicaFencedAfterTakeover(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 4s\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	task := sendTo(t, a, "paused")
	testkit.WaitFor(t, 10*time.Second, "the task running on A", func() bool {
		return getTask(t, b, task.ID).Status.State == a2a.TaskStateWorking && len(testkit.Children(a.cmd.Process.Pid)) == 1
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	continued := false
	defer func() {
		if !continued {
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	var got *a2a.Task
	testkit.WaitFor(t, 10*time.Second, "B took A's task over", func() bool {
		got = getTask(t, b, task.ID)
		return got.Status.State.Terminal()
	})
	t.Logf("SIGSTOP of A to its task taken over by B: %s (lease 1s)", time.Since(stopped))
	// Lease expiry (A's last heartbeat + 1s, A being stopped) to takeover
	// (the failed status B wrote).
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var beat time.Time
	err = conn.QueryRow(context.Background(), `SELECT heartbeat FROM leases WHERE instance = $1`, instanceOf(t, a)).Scan(&beat)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("A's lease expiry to B's takeover: %s", got.Status.Timestamp.Sub(beat.Add(time.Second)))
	if got.Status.State != a2a.TaskStateFailed || got.Metadata["agentd/cause"] != "supervisor_lost" {
		t.Fatalf("A's task taken over: %s %v", got.Status.State, got.Metadata)
	}
	a.cmd.Process.Signal(syscall.SIGCONT)
	continued = true
	resumed := time.Now()
	testkit.WaitFor(t, 10*time.Second, "A fenced off the taken-over task", func() bool {
		return strings.Contains(a.logs.String(), `"msg":"task taken over by another replica: stopping its tree, writing nothing more to it","task_id":"`+string(task.ID)+`"`)
	})
	testkit.WaitFor(t, 10*time.Second, "A's tree stopped", func() bool { return len(testkit.Children(a.cmd.Process.Pid)) == 0 })
	t.Logf("SIGCONT of A to its tree stopped: %s", time.Since(resumed))
	// What A's run wrote as its tree stopped was refused by the database.
	testkit.WaitFor(t, 10*time.Second, "A's write refused", func() bool {
		return strings.Contains(a.logs.String(), "is run by replica "+instanceOf(t, b)+" since it was taken over")
	})
	// A fenced itself once, and did not try to end the task B had ended.
	if n, forced := lineCount(a, "task taken over by another replica: stopping its tree, writing nothing more to it"), lineCount(a, "forcing task to failed"); n != 1 || forced != 0 {
		t.Fatalf("A fenced the task %d times and forced %d ends, want once and none", n, forced)
	}
	// A's tree is gone, so nothing of its run can come later: the task is
	// as B left it.
	if after := getTask(t, a, task.ID); after.Status.State != a2a.TaskStateFailed || artifactText(after) != "" {
		t.Fatalf("the taken-over task after A came back: %s %q", after.Status.State, artifactText(after))
	}
	// A goes on serving: a new task through A completes.
	res, err := a.client(t).SendMessage(context.Background(), textMessage("after the pause"))
	if err != nil {
		t.Fatal(err)
	}
	if tk := res.(*a2a.Task); tk.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("a task through A after the pause: %s", tk.Status.State)
	}
}

// hasMessageID reports whether t's history holds the message id.
func hasMessageID(t *a2a.Task, id string) bool {
	for _, m := range t.History {
		if m.ID == id {
			return true
		}
	}
	return false
}
