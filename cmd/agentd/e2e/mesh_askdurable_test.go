package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.4 across the mesh: a remote child (A's child on peer B) waiting
// on its peer's question is part of A's waiting tree: suspended past
// --input-hold (A's processes end, B's task waits on) and stored with A's
// task (a SIGKILL and a restart of A lose nothing). The answer goes to B's
// task as the live delegation would have sent it, and A's child follows B's
// task to its end.

// meshAskScript is agentd A's: its root spawns a child on peer b and passes
// its question (B's asker, A's 0.1.1) up.
const meshAskScript = "[depth 0]\nspawn sync \"via b\" provider=peer:b\npass 1\nawait\nanswer \"A root: {results}\"\n"

// meshAskWant is A's answer once B's asker was told blue.
const meshAskWant = "A root: B root: B child got blue"

// askThroughB sends A a message and checks A's task input-required with B's
// question.
func askThroughB(t *testing.T, a *service) *a2a.Task {
	t.Helper()
	res, err := a.client(t).SendMessage(context.Background(), textMessage("pick a color"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0.1.1", "[red blue]")
	return task
}

// answerBlue answers A's task and checks it completed with B's asker told.
func answerBlue(t *testing.T, a *service, task *a2a.Task) {
	t.Helper()
	wantCompleted(t, answer(t, a.client(t), task, "blue"), meshAskWant)
	testkit.WaitFor(t, 10*time.Second, "A's child resumed: the answer sent to B's task", func() bool {
		return lineCount(a, "subagent resumes: the answer goes to its peer's task") == 1
	})
}

func TestMeshAskRemoteChildSurvives(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, askingPeerScript))
	script := writeScript(t, meshAskScript)
	peer := []string{"--peer", "b=" + b.url + ",timeout=10s"}

	// (1) Past --input-hold, A's root process ends and A's remote child's
	// follow of B's task ends (B's task is not cancelled); the answer
	// starts A's root again and sends it to B's task.
	t.Run("input-hold", func(t *testing.T) {
		t.Parallel()
		a := startService(t, append(peer, "--input-hold", "50ms", "--intelligence", "builtin:script="+script)...)
		task := askThroughB(t, a)
		testkit.WaitFor(t, 20*time.Second, "A's waiting tree suspended", func() bool {
			return lineCount(a, "subagent suspended") == 1 && lineCount(a, "subagent suspended: its delegation's follow ended, its peer's task waits on") == 1
		})
		testkit.WaitFor(t, 10*time.Second, "no child of A", func() bool { return len(testkit.Children(a.cmd.Process.Pid)) == 0 })
		for _, pid := range startedPIDs(a) {
			testkit.WaitGroupGone(t, pid)
		}
		if got := getTask(t, a, task.ID); got.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("suspended task %s, want input-required", got.Status.State)
		}
		answerBlue(t, a, task)
	})

	// (3) Restarted, a task that ends with no answer (no answer within
	// --input-timeout: failed, input_timeout; or tasks/cancel) has B's task
	// its child waited on cancelled, as the live delegation would have.
	for _, how := range []string{"input-timeout", "cancel"} {
		t.Run("sigkill-restart-"+how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append(peer, "--state-dir", dir, "--intelligence", "builtin:script="+script)
			if how == "input-timeout" {
				args = append(args, "--input-timeout", "2s")
			}
			a := startService(t, args...)
			task := askThroughB(t, a)
			testkit.WaitFor(t, 10*time.Second, "A's waiting tree stored", func() bool {
				return lineCount(a, "waiting tree stored with the task") == 1 && len(startedPIDs(a)) == 1
			})
			m := regexp.MustCompile(`"msg":"peer asks".*?"remote_task_id":"([^"]+)"`).FindStringSubmatch(a.logs.String())
			if m == nil {
				t.Fatal("A's log names no remote task")
			}
			killAndReap(t, a)
			a2 := startService(t, args...)
			if how == "cancel" {
				if _, err := a2.client(t).CancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID}); err != nil {
					t.Fatal(err)
				}
			}
			var got *a2a.Task
			testkit.WaitFor(t, 20*time.Second, "A's task ended", func() bool {
				got = getTask(t, a2, task.ID)
				return got.Status.State.Terminal()
			})
			switch {
			case how == "cancel" && got.Status.State != a2a.TaskStateCanceled:
				t.Fatalf("A's task %s, want canceled", got.Status.State)
			case how == "input-timeout" && (got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaCause] != api.CauseInputTimeout):
				t.Fatalf("A's task %s %v, want failed with cause %s", got.Status.State, got.Metadata, api.CauseInputTimeout)
			}
			testkit.WaitFor(t, 10*time.Second, "B's task cancelled", func() bool {
				return getTask(t, b, a2a.TaskID(m[1])).Status.State == a2a.TaskStateCanceled
			})
		})
	}

	// (2) A's task is stored with its remote child's wait; after a SIGKILL
	// and a restart of A on the same state directory, the answer resumes
	// A's root from its conversation and A's child from B's task.
	t.Run("sigkill-restart", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		args := append(peer, "--state-dir", dir, "--intelligence", "builtin:script="+script)
		a := startService(t, args...)
		task := askThroughB(t, a)
		testkit.WaitFor(t, 10*time.Second, "A's waiting tree stored", func() bool {
			return lineCount(a, "waiting tree stored with the task") == 1 && len(startedPIDs(a)) == 1
		})
		killAndReap(t, a)
		a2 := startService(t, args...)
		if got := getTask(t, a2, task.ID); got.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("after the restart: %s, want input-required", got.Status.State)
		}
		answerBlue(t, a2, task)
	})
}
