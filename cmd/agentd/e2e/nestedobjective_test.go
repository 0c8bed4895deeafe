package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// A nested subagent's large objective (over 16 KiB: the engine leaves it to
// the store, which writes each later snapshot of the task around the stored
// message, copied by the database) reads back whole, byte for byte, through
// tasks/get in A2A 0.3 and 1.0, while the subagent runs and once its tree
// was cancelled: whatever the text holds (quotes, backslashes, what the
// encoding escapes, text that looks like the snapshot's own JSON).
func TestNestedLargeObjectiveReadsBackWhole(t *testing.T) {
	t.Parallel()
	line := `objective: "quoted" \ back\slash <b>&amp; é ✓` + "\u2028\t" + `{"history":[{"kind":"message"}]} ], }` + "\n"
	objective := strings.Repeat(line, 30<<10/len(line))
	script := "[depth 0]\nspawn async " + strconv.Quote(objective) + "\nawait\nanswer \"done\"\n\n[depth 1]\nsleep 1h\nanswer \"never\"\n"
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, script))
	c := s.client(t)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, nonBlocking(textMessage("a tree")))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task)
	child := byChildPath(nestedSpawns(t, s, 1), "0.1")

	check := func(state a2a.TaskState, v1State string) {
		t.Helper()
		var got *a2a.Task
		testkit.WaitFor(t, 10*time.Second, "nested task "+string(state), func() bool {
			got, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: child})
			return err == nil && got.Status.State == state
		})
		if len(got.History) == 0 || len(got.History[0].Parts) != 1 {
			t.Fatalf("0.3: nested task %s: history %+v", state, got.History)
		}
		if tp, ok := got.History[0].Parts[0].(a2a.TextPart); !ok || tp.Text != objective {
			t.Fatalf("0.3: nested task %s: its first message is not its objective (%d bytes, want %d)", state, len(tp.Text), len(objective))
		}
		var v1 struct {
			Status  struct{ State string }
			History []struct {
				Role  string
				Parts []struct{ Text string }
			}
		}
		if e := rpc(t, s, "1.0", "GetTask", `{"id":"`+string(child)+`"}`, &v1); e != nil {
			t.Fatalf("1.0: %+v", e)
		}
		if v1.Status.State != v1State || len(v1.History) == 0 || v1.History[0].Role != "ROLE_USER" ||
			len(v1.History[0].Parts) != 1 || v1.History[0].Parts[0].Text != objective {
			t.Fatalf("1.0: nested task %s: its first message is not its objective", v1.Status.State)
		}
	}
	check(a2a.TaskStateWorking, "TASK_STATE_WORKING")
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: root.ID}); err != nil {
		t.Fatal(err)
	}
	check(a2a.TaskStateCanceled, "TASK_STATE_CANCELED")
}
