package e2e

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.4: a task waiting for its caller's answer survives a SIGKILL of
// agentd (and, on PostgreSQL, its replica's): the tree's record is stored
// with the task when the question is posed; started again (or another
// replica taking the task over), the task waits on input-required with no
// process, and the answer resumes every waiting subagent from its stored
// conversation.

// startedPIDs are the pids of the subagents a service's log says it started.
func startedPIDs(s *service) []int {
	var pids []int
	re := regexp.MustCompile(`"msg":"subagent started".*?"pid":(\d+)`)
	for _, m := range re.FindAllStringSubmatch(s.logs.String(), -1) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// killAndReap SIGKILLs s and waits until every subagent process it started
// (its log's "subagent started" pids) is gone.
func killAndReap(t *testing.T, s *service) {
	t.Helper()
	pids := startedPIDs(s)
	s.kill(t)
	for _, pid := range pids {
		testkit.WaitGroupGone(t, pid)
	}
}

// killWhileWaiting sends "pick a color" through a (the depth-2 ask script),
// checks the task input-required with its tree stored, SIGKILLs a and waits
// until every subagent process of a is gone.
func killWhileWaiting(t *testing.T, a *service) *a2a.Task {
	t.Helper()
	res, err := a.client(t).SendMessage(context.Background(), textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, askScripts[2].path)
	// The log is read as it comes: what was logged before the answer may
	// be read after it.
	testkit.WaitFor(t, 10*time.Second, "the waiting tree stored and its 3 subagents started", func() bool {
		return lineCount(a, "waiting tree stored with the task") == 1 && len(startedPIDs(a)) == 3
	})
	killAndReap(t, a)
	return task
}

func TestAskSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	script := writeScript(t, askScripts[2].script)
	t.Run("sqlite-blocking", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		task := killWhileWaiting(t, startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script))
		s2 := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		c2 := s2.client(t)
		got, err := c2.GetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("after the restart: %v %+v, want input-required", err, got)
		}
		if n := len(startedPIDs(s2)); n != 0 {
			t.Fatalf("%d subagents started before the answer", n)
		}
		wantCompleted(t, answer(t, c2, task, "blue"), askScripts[2].want)
		testkit.WaitFor(t, 10*time.Second, "3 subagents resumed from their conversations", func() bool {
			return lineCount(s2, "resumed from a stored conversation") == 3
		})
	})
	t.Run("sqlite-stream", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		task := killWhileWaiting(t, startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script))
		s2 := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		c2 := s2.client(t)
		var states []a2a.TaskState
		for ev, err := range c2.SendStreamingMessage(context.Background(), answerTo(task, "blue")) {
			if err != nil {
				t.Fatal(err)
			}
			switch v := ev.(type) {
			case *a2a.Task:
				states = append(states, v.Status.State)
			case *a2a.TaskStatusUpdateEvent:
				states = append(states, v.Status.State)
			}
		}
		if len(states) == 0 || states[0] != a2a.TaskStateWorking || states[len(states)-1] != a2a.TaskStateCompleted {
			t.Fatalf("the answer's stream: %v, want working to completed", states)
		}
		got, err := c2.GetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
		if err != nil || artifactText(got) != askScripts[2].want {
			t.Fatalf("after the stream: %v %q, want %q", err, artifactText(got), askScripts[2].want)
		}
	})
	// A stored record that does not decode fails the task, by name, as
	// soon as it is recovered; nothing starts.
	t.Run("sqlite-bad-record", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		task := killWhileWaiting(t, startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script))
		db, err := sql.Open("sqlite", filepath.Join(dir, "agentd.db"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := db.Exec("UPDATE tasks SET waiting = ? WHERE id = ?", []byte(`{"version":`), string(task.ID))
		if n, _ := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("corrupting the record: %v (%d rows)", err, n)
		}
		db.Close()
		s2 := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		var got *a2a.Task
		testkit.WaitFor(t, 10*time.Second, "the task ended", func() bool {
			got = getTask(t, s2, task.ID)
			return got.Status.State.Terminal()
		})
		if got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaCause] != api.CauseResumeFailed {
			t.Fatalf("task %s %v, want failed with cause %s", got.Status.State, got.Metadata, api.CauseResumeFailed)
		}
		if n := len(startedPIDs(s2)); n != 0 {
			t.Fatalf("%d subagents started from a bad record", n)
		}
	})
	// --input-timeout counts from the question, across the restart: with
	// no answer the task fails, cause input_timeout.
	t.Run("sqlite-input-timeout", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		args := []string{"--state-dir", dir, "--input-timeout", "2s", "--intelligence", "builtin:script=" + script}
		task := killWhileWaiting(t, startService(t, args...))
		s2 := startService(t, args...)
		var got *a2a.Task
		testkit.WaitFor(t, 20*time.Second, "the task ended", func() bool {
			got = getTask(t, s2, task.ID)
			return got.Status.State.Terminal()
		})
		if got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaCause] != api.CauseInputTimeout {
			t.Fatalf("task %s %v, want failed with cause %s", got.Status.State, got.Metadata, api.CauseInputTimeout)
		}
	})
	t.Run("postgres-other-replica", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Start(t).Database(t)
		a := replica(t, dsn, "--intelligence", "builtin:script="+script)
		b := replica(t, dsn, "--intelligence", "builtin:script="+script)
		task := killWhileWaiting(t, a)
		// B takes the task over once A's lease has expired.
		testkit.WaitFor(t, 20*time.Second, "B holding the waiting task", func() bool {
			return lineCount(b, "task waits for its answer: it resumes from its stored tree when the answer comes") == 1
		})
		wantCompleted(t, answer(t, b.client(t), task, "blue"), askScripts[2].want)
	})
}

// metricsText is the service's /metrics page.
func metricsText(t *testing.T, s *service) string {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return readAll(resp.Body)
}

// With --input-hold, a tree waiting for its answer ends its processes and
// gives back its slots (the admission gauge at 0, no child of agentd left);
// the answer starts each waiting subagent again from its conversation and
// the task completes with what each was told and had done before.
func TestAskInputHoldSuspends(t *testing.T) {
	t.Parallel()
	s := startService(t, "--input-hold", "50ms", "--intelligence", "builtin:script="+writeScript(t, askScripts[2].script))
	c := s.client(t)
	res, err := c.SendMessage(context.Background(), textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionOf(t, task, askScripts[2].path)
	testkit.WaitFor(t, 20*time.Second, "the waiting tree suspended", func() bool { return lineCount(s, "subagent suspended") == 3 })
	testkit.WaitFor(t, 10*time.Second, "no child of agentd", func() bool { return len(testkit.Children(s.cmd.Process.Pid)) == 0 })
	for _, pid := range startedPIDs(s) {
		testkit.WaitGroupGone(t, pid)
	}
	m := metricsText(t, s)
	for _, want := range []string{"agent_admission_live_subagents 0", "agent_subagent_processes 0"} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics while suspended has no %q", want)
		}
	}
	if got := getTask(t, s, task.ID); got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("suspended task %s, want input-required", got.Status.State)
	}
	wantCompleted(t, answer(t, c, task, "blue"), askScripts[2].want)
	testkit.WaitFor(t, 10*time.Second, "3 subagents resumed, in 3 processes more", func() bool {
		return lineCount(s, "resumed from a stored conversation") == 3 && len(startedPIDs(s)) == 6
	})
}

// endedChildScript's root spawns A, which ends, and B, which asks; the root
// passes B's question up and, after the answer, awaits A and B again by
// handle: its answer is every tool result it saw.
const endedChildScript = "[depth 0]\nspawn async \"A\"\nspawn async \"B\"\nawait\npass 2\nawait 1\nawait 2\nanswer \"{transcript}\"\n" +
	"[path 0.1]\nanswer \"A finished\"\n" +
	"[path 0.2]\nask \"Which color?\" choices=red,blue\nanswer \"B got {answer}\"\n"

// checkEndedChildAwaited checks the task completed and its root's await of
// the ended child A after the answer found A's report.
func checkEndedChildAwaited(t *testing.T, done *a2a.Task) {
	t.Helper()
	got := artifactText(done)
	if done.Status.State != a2a.TaskStateCompleted || strings.Contains(got, "no subagent with handle") ||
		strings.Count(got, "A finished") != 2 || !strings.Contains(got, "B got blue") {
		t.Fatalf("after the answer: %s, the root saw:\n%s\nwant completed, A's report twice (before and after the answer) and B's", done.Status.State, got)
	}
	var reports []string // A's report as each await found it
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, api.ToolAwait+": ") && strings.Contains(l, "A finished") {
			reports = append(reports, l)
		}
	}
	if len(reports) != 2 || reports[0] != reports[1] {
		t.Fatalf("A's report before and after the answer differ:\n%s", strings.Join(reports, "\n"))
	}
}

// Issue 32.4: a child that had ended before its parent's question waited
// keeps its report across a suspension and a restart: the resumed root's
// subagent.await of it answers with its result, as before.
func TestAskEndedChildSurvives(t *testing.T) {
	t.Parallel()
	script := writeScript(t, endedChildScript)
	t.Run("input-hold", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "--input-hold", "50ms", "--intelligence", "builtin:script="+script)
		c := s.client(t)
		res, err := c.SendMessage(context.Background(), textMessage("pick a color"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		questionOf(t, task, "0.2")
		testkit.WaitFor(t, 20*time.Second, "the waiting tree suspended", func() bool { return lineCount(s, "subagent suspended") == 2 })
		checkEndedChildAwaited(t, answer(t, c, task, "blue"))
	})
	t.Run("sqlite-sigkill", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		a := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		res, err := a.client(t).SendMessage(context.Background(), textMessage("pick a color"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		questionOf(t, task, "0.2")
		testkit.WaitFor(t, 10*time.Second, "the waiting tree stored, A's end with it", func() bool {
			return strings.Contains(a.logs.String(), `"msg":"waiting tree stored with the task"`) && len(startedPIDs(a)) == 3
		})
		if !regexp.MustCompile(`"msg":"waiting tree stored with the task".*"subagents":2,"ended":1`).MatchString(a.logs.String()) {
			t.Fatalf("the stored record is not of 2 waiting subagents and 1 ended:\n%s", a.logs.String())
		}
		killAndReap(t, a)
		s2 := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		checkEndedChildAwaited(t, answer(t, s2.client(t), task, "blue"))
		if n := lineCount(s2, "resumed from a stored conversation"); n > 2 {
			t.Fatalf("%d subagents resumed, want the 2 that waited (A is not run again)", n)
		}
	})
}

// workingSiblingScript's root spawns a worker that works for a while and an
// asker, passes the asker's question up while the worker still works, then
// awaits both.
const workingSiblingScript = "[depth 0]\nspawn async \"worker\"\nspawn async \"asker\"\nawait 2\npass 2\nawait\nanswer \"root: {results}\"\n" +
	"[path 0.1]\nsleep 3s\nanswer \"worker done\"\n" +
	"[path 0.2]\nask \"Which color?\" choices=red,blue\nanswer \"asker got {answer}\"\n"

// Issue 32.4: a tree with a subagent still working when the root's question
// is posed is stored as soon as it becomes a waiting tree (the worker
// ends), so a SIGKILL after that loses nothing: the answer completes the
// task.
func TestAskWorkingSiblingStoredWhenItEnds(t *testing.T) {
	t.Parallel()
	script := writeScript(t, workingSiblingScript)
	const want = "root: worker done\nasker got blue"
	t.Run("sqlite-sigkill", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		a := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		res, err := a.client(t).SendMessage(context.Background(), textMessage("pick a color"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		questionOf(t, task, "0.2")
		testkit.WaitFor(t, 10*time.Second, "the question posed while the worker works", func() bool {
			return lineCount(a, "question not stored yet: a subagent of the tree is not waiting on it (it is stored when every one waits or has ended; a restart before would lose the task)") == 1
		})
		testkit.WaitFor(t, 20*time.Second, "the tree stored once the worker ended", func() bool {
			return lineCount(a, "waiting tree stored with the task") == 1 && len(startedPIDs(a)) == 3
		})
		killAndReap(t, a)
		s2 := startService(t, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		wantCompleted(t, answer(t, s2.client(t), task, "blue"), want)
	})
	// On PostgreSQL the replica that takes the task over holds the record
	// stored when the worker ended, and the answer through it completes.
	t.Run("postgres-other-replica", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Start(t).Database(t)
		a := replica(t, dsn, "--intelligence", "builtin:script="+script)
		b := replica(t, dsn, "--intelligence", "builtin:script="+script)
		res, err := a.client(t).SendMessage(context.Background(), textMessage("pick a color"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		questionOf(t, task, "0.2")
		testkit.WaitFor(t, 20*time.Second, "the tree stored once the worker ended", func() bool {
			return lineCount(a, "waiting tree stored with the task") == 1 && len(startedPIDs(a)) == 3
		})
		killAndReap(t, a)
		testkit.WaitFor(t, 20*time.Second, "B holding the waiting task", func() bool {
			return lineCount(b, "task waits for its answer: it resumes from its stored tree when the answer comes") == 1
		})
		wantCompleted(t, answer(t, b.client(t), task, "blue"), want)
	})
	// --input-hold suspends the tree once it is a waiting tree.
	t.Run("input-hold", func(t *testing.T) {
		t.Parallel()
		s := startService(t, "--input-hold", "50ms", "--intelligence", "builtin:script="+script)
		c := s.client(t)
		res, err := c.SendMessage(context.Background(), textMessage("pick a color"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		questionOf(t, task, "0.2")
		testkit.WaitFor(t, 20*time.Second, "the waiting tree suspended after the worker ended", func() bool {
			return lineCount(s, "subagent suspended") == 2
		})
		wantCompleted(t, answer(t, c, task, "blue"), want)
	})
}
