package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// Issue 28.7 through the binary: a message whose delegation carries a
// 3.5 MiB seed and a 3.5 MiB follow-up, each under --max-message (4 MiB),
// would make the next turn a 7.3 MB spawn payload, over the control frame
// limit. The follow-up is refused when it is sent (-32602 naming
// --max-message) and the task goes on: its first turn completes it. Before,
// the follow-up was accepted and the task ended rejected ("control frame
// over the size limit"). The follow-up must arrive while the first turn
// runs: the turn lasts 20 s, where a 3 s one was over before the follow-up
// came in, once, beside other tests under -race on a loaded machine (-32004).
func TestFollowUpOverTheFrameIsRefused(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\nsleep 20s\nanswer \"done: {objective}\"\n")
	// The script counts the seed as tokens: a grant that holds it.
	s := startService(t, "--intelligence", "builtin:script="+script, "--max-tokens", "4000000")
	big := strings.Repeat("a", 7<<19) // 3.5 MiB
	delegation, _ := json.Marshal(map[string]any{"agentd/delegation": map[string]any{
		"contract": map[string]any{"objective": "first", "output_format": map[string]any{"kind": "text"}},
		"seed":     map[string]any{"slices": []any{map[string]any{"label": "big", "content": map[string]any{"text": big}}}},
		"limits":   map[string]any{}, "telemetry": map[string]any{},
	}})
	var task a2a.Task
	if e := rpc(t, s, "", "message/send", `{"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"first"},{"kind":"data","data":`+string(delegation)+`}]},"configuration":{"blocking":false}}`, &task); e != nil {
		t.Fatalf("the first message: %+v", e)
	}
	follow := `{"message":{"messageId":"m2","taskId":"` + string(task.ID) + `","role":"user","parts":[{"kind":"text","text":"` + big + `"}]},"configuration":{"blocking":false}}`
	e := rpc(t, s, "", "message/send", follow, nil)
	if e == nil || e.Code != -32602 || !strings.Contains(string(e.Data), "--max-message") {
		t.Errorf("a follow-up the next turn cannot carry: %+v, want -32602 naming --max-message", e)
	}
	var got a2a.Task
	testkit.WaitFor(t, 60*time.Second, "the task ended", func() bool {
		if e := rpc(t, s, "", "tasks/get", `{"id":"`+string(task.ID)+`"}`, &got); e != nil {
			t.Fatalf("tasks/get: %+v", e)
		}
		return got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the task after the refused follow-up: %s %+v", got.Status.State, got.Status.Message)
	}
}
