package a2abind

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor"
)

// TestStackPerWaitingTask: what a task whose child waits keeps of the
// supervisor's goroutine stacks, after collections: its executor's
// goroutine, parked in runTurn until the turn settles, and the
// supervisor's supervise loop (its control-out and stderr are read by the
// supervisor's two pollers, no goroutine of the child's own). The
// executor's waiting frames held the delegation request by value (about
// 800 bytes in each of three frames, with the frames' other locals about 9
// KB), which kept its stack at 16 KiB, where the collector halves a stack
// only while under a quarter of it is used; with the request a pointer and
// the work before and after the wait in helpers of their own (accept,
// startTurn, endTurn), its waiting frames are about 2.5 KB and its stack 8
// KiB: 15-18.4 KiB a task measured, 23.5-26.6 with the request by value
// (issue 35: the supervisor's memory per live child).
func TestStackPerWaitingTask(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation grows stack frames")
	}
	ctx := context.Background()
	h := startHeld(t, tasks.NewMemoryStore(1000, time.Hour), func(c *supervisor.Config) {
		c.PingInterval, c.ProgressTimeout = time.Minute, time.Hour // no ping write in flight while counting
	})
	defer h.stop()
	e, held := h.e, h.held
	send := func(i int) {
		blocking := false
		p := &a2a.MessageSendParams{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: fmt.Sprintf("task %d: %s", i, strings.Repeat("an objective of some length. ", 200))}),
			Config:  &a2a.MessageSendConfig{Blocking: &blocking},
		}
		if _, err := e.OnSendMessage(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	children := func(n int) func() bool {
		return func() bool {
			entries, _ := os.ReadDir(held)
			return len(entries) == n
		}
	}
	// What the first task sets up once is in the base.
	send(0)
	testkit.WaitFor(t, 10*time.Second, "the first child has its payload", children(1))
	stacks := func() int64 {
		runtime.GC()
		runtime.GC() // the second shrinks the stacks the first found oversized
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.StackInuse)
	}
	base := stacks()
	const n = 32
	for i := 1; i <= n; i++ {
		send(i)
	}
	testkit.WaitFor(t, 30*time.Second, "every child has its payload", children(n+1))
	var per int64
	// The last runs' goroutines may still be on their way to the wait.
	testkit.Poll(5*time.Second, func() bool {
		per = (stacks() - base) / n
		return per <= maxStackPerTask
	})
	t.Logf("a waiting task: %d B of goroutine stacks", per)
	if per > maxStackPerTask {
		t.Errorf("a waiting task keeps %d B of goroutine stacks, want at most %d", per, maxStackPerTask)
	}
}

// maxStackPerTask bounds TestStackPerWaitingTask: 15-18.4 KiB measured
// (the executor's 8 KiB and the supervise loop's 8), 23.5-26.6 with the
// executor's 16.
const maxStackPerTask = 21 << 10
