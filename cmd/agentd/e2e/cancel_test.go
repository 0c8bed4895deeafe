package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/testkit"
)

// TestCancelledTaskReadsOnce cancels a running task (a real subagent, killed
// by the ladder) and reads it back on both versions: it ends canceled with no
// artifact, since the subagent produced none (an empty one was published),
// and its status message names the status once ("cancelled: cancelled: task
// cancelled by tasks/cancel" before).
func TestCancelledTaskReadsOnce(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:demo=30s", "--send-wait", "100ms")
	var task wireTask
	if e := rpc(t, s, "", "message/send", textParams("cancel me", ""), &task); e != nil || task.ID == "" {
		t.Fatalf("send: %+v %+v", task, e)
	}
	testkit.WaitFor(t, 10e9, "the task works", func() bool {
		var got wireTask
		return rpc(t, s, "", "tasks/get", `{"id":"`+task.ID+`"}`, &got) == nil && got.Status.State == "working"
	})
	if e := rpc(t, s, "", "tasks/cancel", `{"id":"`+task.ID+`"}`, nil); e != nil {
		t.Fatalf("cancel: %+v", e)
	}
	var got wireTask
	testkit.WaitFor(t, 10e9, "the task is canceled", func() bool {
		return rpc(t, s, "", "tasks/get", `{"id":"`+task.ID+`"}`, &got) == nil && got.Status.State == "canceled"
	})
	var msg struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(got.Status.Message, &msg); err != nil || len(msg.Parts) != 1 {
		t.Fatalf("status message %s: %v", got.Status.Message, err)
	}
	text := msg.Parts[0].Text
	if !strings.HasPrefix(text, "cancelled: ") || strings.Count(text, "cancel") != 1 {
		t.Errorf("status message %q, want \"cancelled: \" and the reason, the status named once", text)
	}
	if len(got.Artifacts) != 0 {
		t.Errorf("the cancelled task has artifacts %s, want none", got.Artifacts)
	}
	var v1 struct {
		Artifacts []json.RawMessage `json:"artifacts"`
		Status    struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if e := rpc(t, s, "1.0", "GetTask", `{"id":"`+task.ID+`"}`, &v1); e != nil || v1.Status.State != "TASK_STATE_CANCELED" || len(v1.Artifacts) != 0 {
		t.Errorf("GetTask: %+v %+v, want canceled with no artifact", v1, e)
	}
}
