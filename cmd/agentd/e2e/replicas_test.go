package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// replica starts agentd serve on the PostgreSQL database dsn (the DSN in the
// environment, as a Secret would give it), with a short lease.
func replica(t *testing.T, dsn string, args ...string) *service {
	t.Helper()
	all := append([]string{"--store", "postgres", "--store-lease", "1s", "--push-allow-net", "127.0.0.0/8"}, args...)
	return startServiceAs(t, agentdBin, []string{"AGENT_STORE_DSN=" + dsn}, all...)
}

// Two replicas on one PostgreSQL are one service: a task sent through A is
// read, listed, streamed, given a webhook and cancelled through B; a message
// sent to both is one task; when A is SIGKILLed, B resolves A's running
// task within the lease.
func TestReplicasOnePostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 1500ms\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	ca, cb := a.client(t), b.client(t)
	ctx := context.Background()

	// Sent through A; read and streamed through B until it completes.
	res, err := ca.SendMessage(ctx, nonBlocking(textMessage("first")))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	if got := getTask(t, b, id); got.Status.State.Terminal() {
		t.Fatalf("through B at once: %s", got.Status.State)
	}
	var states []a2a.TaskState
	var final *a2a.Task
	for ev, err := range cb.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: id}) {
		if err != nil {
			t.Fatalf("stream through B: %v", err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			states = append(states, v.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, v.Status.State)
		}
	}
	final = getTask(t, b, id)
	if len(states) < 2 || states[len(states)-1] != a2a.TaskStateCompleted || final.Status.State != a2a.TaskStateCompleted || artifactText(final) != "done: first" {
		t.Fatalf("streamed through B: %v, then %s %q", states, final.Status.State, artifactText(final))
	}
	if n := len(listAll(t, b)); n != 1 {
		t.Fatalf("ListTasks through B: %d tasks", n)
	}

	// A webhook set through B is called by A, which runs the task.
	var mu sync.Mutex
	var hooks []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		hooks = append(hooks, body.Status.State)
		mu.Unlock()
	}))
	defer hook.Close()
	res, err = ca.SendMessage(ctx, nonBlocking(textMessage("second")))
	if err != nil {
		t.Fatal(err)
	}
	second := res.(*a2a.Task).ID
	if _, err := cb.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: second, Config: a2a.PushConfig{URL: hook.URL + "/hook"}}); err != nil {
		t.Fatalf("set a push config through B: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "the webhook told of the end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hooks) > 0 && hooks[len(hooks)-1] == "completed"
	})
	if cfgs, err := ca.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: second}); err != nil || len(cfgs) != 1 {
		t.Fatalf("the push config through A: %v %v", cfgs, err)
	}

	// Cancelled through B: A stops the tree.
	res, err = ca.SendMessage(ctx, nonBlocking(textMessage("third")))
	if err != nil {
		t.Fatal(err)
	}
	third := res.(*a2a.Task).ID
	testkit.WaitFor(t, 10*time.Second, "the third task running", func() bool { return getTask(t, b, third).Status.State == a2a.TaskStateWorking })
	cancelled, err := cb.CancelTask(ctx, &a2a.TaskIDParams{ID: third})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel through B: %+v %v", cancelled, err)
	}

	// One message sent to both replicas is one task.
	m1, m2 := textMessage("once"), textMessage("once")
	m1.Message.ID, m2.Message.ID = "replicated-message", "replicated-message"
	r1, err := ca.SendMessage(ctx, nonBlocking(m1))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cb.SendMessage(ctx, m2) // blocking: B waits for A's run
	if err != nil {
		t.Fatal(err)
	}
	if r1.(*a2a.Task).ID != r2.(*a2a.Task).ID || r2.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("a message through both: %s and %s (%s)", r1.(*a2a.Task).ID, r2.(*a2a.Task).ID, r2.(*a2a.Task).Status.State)
	}
	if n := lineCount(a, "task accepted") + lineCount(b, "task accepted"); n != 4 {
		t.Fatalf("%d runs for four messages", n)
	}

	// A dies mid-task: B resolves its task once A's lease has expired.
	res, err = ca.SendMessage(ctx, nonBlocking(textMessage("lost")))
	if err != nil {
		t.Fatal(err)
	}
	lost := res.(*a2a.Task).ID
	testkit.WaitFor(t, 10*time.Second, "the lost task running", func() bool { return getTask(t, b, lost).Status.State == a2a.TaskStateWorking })
	a.kill(t)
	killed := time.Now()
	var got *a2a.Task
	testkit.WaitFor(t, 10*time.Second, "B resolved A's task", func() bool {
		got = getTask(t, b, lost)
		return got.Status.State.Terminal()
	})
	took := time.Since(killed)
	t.Logf("SIGKILL of A to its task resolved by B: %s (lease 1s, B looks every 500ms)", took)
	if got.Status.State != a2a.TaskStateFailed || got.Metadata["agentd/cause"] != "supervisor_lost" {
		t.Fatalf("A's task after A died: %s %v", got.Status.State, got.Metadata)
	}
	// A renews its lease every third of it, so its last heartbeat was at most
	// 333ms before the kill: B may not resolve the task before the remaining
	// two thirds of the lease have passed (less a little for timer slack).
	if took < 600*time.Millisecond {
		t.Fatalf("resolved %s after the kill: before the lease expired", took)
	}
}

// PostgreSQL lost mid-run: a new message is refused with a clear JSON-RPC
// error (nothing stored), the running task waits, and once the database is
// back the task completes and new messages are taken again.
func TestPostgresLostMidRun(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 1s\nanswer \"survived\"\n")
	s := replica(t, dsn, "--intelligence", "builtin:script="+script)
	c := s.client(t)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, nonBlocking(textMessage("keep going")))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	testkit.WaitFor(t, 10*time.Second, "the task running", func() bool { return lineCount(s, "subagent started") >= 1 })
	srv.Stop()
	var reply struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body := `{"messageId":"during-the-outage","role":"user","parts":[{"kind":"text","text":"hello"}]}`
	if e := rpc(t, s, "", "message/send", `{"message":`+body+`,"configuration":{"blocking":false}}`, &reply); e == nil ||
		!strings.Contains(e.Message, "task store is unavailable") {
		t.Fatalf("a send while the database is down: %+v", e)
	}
	srv.Restart(t)
	testkit.WaitFor(t, 30*time.Second, "the task completed once the database is back", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
		return err == nil && got.Status.State == a2a.TaskStateCompleted && artifactText(got) == "survived"
	})
	if _, err := c.SendMessage(ctx, nonBlocking(textMessage("after"))); err != nil {
		t.Fatalf("a send after the database is back: %v", err)
	}
	// The message sent during the outage was not stored: sent again, it runs.
	again := textMessage("hello")
	again.Message.ID = "during-the-outage"
	if _, err := c.SendMessage(ctx, again); err != nil {
		t.Fatal(err)
	}
}

// A DSN that cannot be reached at start is bad config: exit 2, naming where
// the DSN came from; so is a missing DSN file.
func TestPostgresBadConfig(t *testing.T) {
	t.Parallel()
	wantUsageError(t, "AGENT_STORE_DSN=postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", "AGENT_STORE_DSN",
		"serve", "--listen", "127.0.0.1:0", "--store", "postgres")
	wantUsageError(t, "", "--store-dsn-file", "serve", "--listen", "127.0.0.1:0", "--store", "postgres", "--store-dsn-file", "/nonexistent/dsn")
	wantUsageError(t, "AGENT_STORE_DSN=postgres://u@127.0.0.1:1/db", "--store-lease", "serve", "--listen", "127.0.0.1:0", "--store", "postgres", "--store-lease", "1ms")
}

// Under --recover rerun, a task cancelled through replica B just after its
// runner A was SIGKILLed is not run to its end by the replica that takes it
// over: the cancel holds.
func TestReplicasCancelWhileRunnerLost(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 3s\nanswer \"ran to its end\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script, "--recover", "rerun")
	b := replica(t, dsn, "--intelligence", "builtin:script="+script, "--recover", "rerun")
	ca, cb := a.client(t), b.client(t)
	ctx := context.Background()
	res, err := ca.SendMessage(ctx, nonBlocking(textMessage("long")))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	testkit.WaitFor(t, 10*time.Second, "the task running on A", func() bool { return getTask(t, b, id).Status.State == a2a.TaskStateWorking })
	a.kill(t)
	got, err := cb.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
	if err != nil {
		t.Fatalf("cancel through B: %v", err)
	}
	if got.Status.State == a2a.TaskStateCompleted {
		t.Fatalf("cancelled through B while A was lost: the task ran to its end (%s)", artifactText(got))
	}
	if final := getTask(t, b, id); final.Status.State != a2a.TaskStateCanceled || lineCount(b, "rerunning task") != 1 {
		t.Fatalf("the task after its cancel: %s (rerun by B %d times)", final.Status.State, lineCount(b, "rerunning task"))
	}
}

// PostgreSQL restarted while replica B streams a task replica A runs: the
// stream goes on and ends with the task's end.
func TestReplicaStreamAcrossDatabaseRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 3s\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	id := sendV1(t, a, "through a restart", "")
	testkit.WaitFor(t, 10*time.Second, "the task running", func() bool { return lineCount(a, "subagent started") >= 1 })
	events := make(chan []rpcReply, 1)
	go func() {
		_, ev := stream(t, b, "SubscribeToTask", `{"id":"`+id+`"}`, 100)
		events <- ev
	}()
	testkit.WaitFor(t, 10*time.Second, "B watching", func() bool {
		var n int
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return false
		}
		defer c.Close(context.Background())
		c.QueryRow(context.Background(), "SELECT count(*) FROM task_watchers").Scan(&n)
		return n > 0
	})
	srv.Stop()
	srv.Restart(t)
	select {
	case ev := <-events:
		if len(ev) == 0 || !strings.Contains(string(ev[len(ev)-1].Result), "TASK_STATE_COMPLETED") {
			t.Fatalf("the stream through B: %d events, the last %s %+v", len(ev), ev[len(ev)-1].Result, ev[len(ev)-1].Error)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream through B did not end within 30s")
	}
}

// Replica A is SIGKILLed while its delivery to a task's webhook hangs: B,
// which resolves the task, tells the webhook A's pending events first and
// the task's failed end last.
func TestReplicasPushInOrderOnTakeover(t *testing.T) {
	t.Parallel()
	hook := newHeldHook(t)
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 10s\nanswer \"never\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	msg := nonBlocking(textMessage("notify me"))
	msg.Config.PushConfig = &a2a.PushConfig{URL: hook.URL + "/hook"}
	res, err := a.client(t).SendMessage(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	pending := func() int {
		var n int
		c.QueryRow(context.Background(), "SELECT count(*) FROM push_pending").Scan(&n)
		return n
	}
	testkit.WaitFor(t, 10*time.Second, "the task's events journaled", func() bool { return pending() >= 1 })
	a.kill(t)
	hook.release()
	testkit.WaitFor(t, 10*time.Second, "B resolved A's task", func() bool { return getTask(t, b, id).Status.State.Terminal() })
	testkit.WaitFor(t, 10*time.Second, "the webhook told of the end", func() bool { return hook.toldOf("", "failed") })
	testkit.WaitFor(t, 10*time.Second, "the pending notifications delivered", func() bool { return pending() == 0 })
	hook.wantFailedLast(t, "A's pending events")
}

// PostgreSQL restarted while a blocking send through replica B waits for the
// run of the same message on replica A: the send is answered with the task's
// end.
func TestReplicaDuplicateSendAcrossDatabaseRestart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 3s\nanswer \"done\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	m := textMessage("once")
	m.Message.ID = "sent-through-a-restart"
	if _, err := a.client(t).SendMessage(context.Background(), nonBlocking(m)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the task running", func() bool { return lineCount(a, "subagent started") >= 1 })
	type answer struct {
		res a2a.SendMessageResult
		err error
	}
	answered := make(chan answer, 1)
	cb := b.client(t)
	go func() {
		again := textMessage("once")
		again.Message.ID = "sent-through-a-restart"
		res, err := cb.SendMessage(context.Background(), again) // blocking: B waits for A's run
		answered <- answer{res, err}
	}()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "B watching", func() bool {
		var n int
		c.QueryRow(context.Background(), "SELECT count(*) FROM task_watchers").Scan(&n)
		return n > 0
	})
	c.Close(context.Background())
	srv.Stop()
	srv.Restart(t)
	select {
	case a := <-answered:
		if a.err != nil || a.res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the blocking send through B: %v %v", a.res, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocking send through B not answered within 30s")
	}
}

// PostgreSQL stopped for twice the lease (and more) while two replicas each
// run tasks: once it is back, neither replica takes the other's tasks over
// (each had been cut off as much as the other, and renews its lease within a
// third of it), so no task is failed as lost and no tree is fenced: every
// task completes on the replica that runs it. The database is stopped four
// times, for 2, 2.25, 2.5 and 2.75 leases, so that its return falls at
// another point of the replicas' heartbeats and takeover rounds each time.
// After each return the test waits until both replicas' leases were
// renewed after it, so that each replica lives through each outage; the
// shared queue's sentinel row (agentd:queue, heartbeat 'infinity') is not a
// replica's lease (the check once counted it, so it held only while exactly
// one replica had renewed: "both leases not renewed", 7 runs in 16 at load).
func TestReplicasRideOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	const perReplica = 4
	const lease = time.Second
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 18s\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	var ids []a2a.TaskID
	for _, s := range []*service{a, b} {
		c := s.client(t)
		for i := range perReplica {
			res, err := c.SendMessage(context.Background(), nonBlocking(textMessage(fmt.Sprintf("task %d", i))))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.(*a2a.Task).ID)
		}
	}
	testkit.WaitFor(t, 20*time.Second, "every task running", func() bool {
		return lineCount(a, "subagent started") >= perReplica && lineCount(b, "subagent started") >= perReplica
	})
	for k := range 4 {
		srv.Stop()
		// The outage itself (not a wait for a condition): every lease in
		// the database has expired when it returns.
		time.Sleep(2*lease + time.Duration(k)*lease/4)
		srv.Restart(t)
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		var back time.Time
		if err := c.QueryRow(context.Background(), `SELECT now()`).Scan(&back); err != nil {
			t.Fatal(err)
		}
		renewed := testkit.Poll(10*time.Second, func() bool {
			var n int
			c.QueryRow(context.Background(), `SELECT count(*) FROM leases WHERE instance <> 'agentd:queue' AND heartbeat > $1`, back).Scan(&n)
			return n == 2
		})
		c.Close(context.Background())
		if !renewed {
			t.Fatalf("outage %d: both leases not renewed within 10s of the database's return", k+1)
		}
	}
	var states []string
	testkit.WaitFor(t, 40*time.Second, "every task ended", func() bool {
		states = states[:0]
		for _, id := range ids {
			got := getTask(t, a, id)
			if !got.Status.State.Terminal() {
				return false
			}
			states = append(states, fmt.Sprintf("%s %v", got.Status.State, got.Metadata["agentd/cause"]))
		}
		return true
	})
	lost := 0
	for _, st := range states {
		if !strings.HasPrefix(st, string(a2a.TaskStateCompleted)) {
			lost++
		}
	}
	t.Logf("after four outages of 2 to 2.75 leases (lease %s): %d of %d tasks lost", lease, lost, len(ids))
	if lost > 0 || lineCount(a, "taken over") > 0 || lineCount(b, "taken over") > 0 {
		t.Fatalf("%d of %d tasks lost across the outages: %v", lost, len(ids), states)
	}
}

// A NUL character where PostgreSQL's text cannot hold it gets the answer
// SQLite's gives: a task id with one is not found (-32001), a new message
// whose contextId or messageId holds one is invalid params (-32602) and
// creates nothing; neither is "task store unavailable".
func TestPostgresAnswersTextAsSQLite(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	script := writeScript(t, "[depth 0]\nanswer \"done\"\n")
	pg := replica(t, srv.Database(t), "--intelligence", "builtin:script="+script)
	lite := startService(t, "--intelligence", "builtin:script="+script)
	for _, c := range []struct {
		method, params string
		code           int
	}{
		{"tasks/get", `{"id":"a\u0000b"}`, -32001},
		{"message/send", `{"message":{"messageId":"m1","contextId":"a\u0000b","role":"user","parts":[{"kind":"text","text":"x"}]}}`, -32602},
		{"message/send", `{"message":{"messageId":"a\u0000b","role":"user","parts":[{"kind":"text","text":"x"}]}}`, -32602},
	} {
		for name, s := range map[string]*service{"postgres": pg, "sqlite": lite} {
			if e := rpc(t, s, "", c.method, c.params, nil); e == nil || e.Code != c.code {
				t.Errorf("%s %s %s: %+v, want %d", name, c.method, c.params, e, c.code)
			}
		}
	}
	for name, s := range map[string]*service{"postgres": pg, "sqlite": lite} {
		if n := len(listAll(t, s)); n != 0 {
			t.Errorf("%s holds %d tasks after the refused messages", name, n)
		}
	}
}
