package supervisor

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// A tool step keeps the head of the call's arguments, cut as ClipStepText
// cuts them whole, and copies no more than that head: the supervisor copied a
// spawn's whole arguments (the child's objective, 64 KiB in figure 9) for
// every step it recorded (issue 35).
func TestToolStepClipsArgsWithoutCopyingThem(t *testing.T) {
	began := time.Now()
	for _, n := range []int{0, 10, api.MaxStepText - 1, api.MaxStepText, api.MaxStepText + 1, api.MaxStepText + 2, 64 << 10} {
		for _, fill := range []string{"a", "é", "€"} {
			args := strings.Repeat(fill, n/len(fill)+1)[:n] // may end inside a character
			want, wantCut := api.ClipStepText(args)
			got := toolStep(api.ToolCall{Tool: "t", Args: json.RawMessage(args)}, api.ToolResult{}, began)
			if got.Args != want || got.Cut != wantCut {
				t.Fatalf("%d bytes of %q: kept %d bytes, cut %d; want %d, %d", n, fill, len(got.Args), got.Cut, len(want), wantCut)
			}
		}
	}
	args := json.RawMessage(strings.Repeat("the objective ", 5000)) // 70 KB
	call := api.ToolCall{Tool: "subagent.spawn", Args: args}
	var before, after runtime.MemStats
	const runs = 10
	runtime.ReadMemStats(&before)
	for range runs {
		_ = toolStep(call, api.ToolResult{}, began)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > api.MaxStepText+4<<10 {
		t.Fatalf("a step of %d bytes of arguments allocated %d bytes, want at most %d", len(args), per, api.MaxStepText+4<<10)
	}
}
