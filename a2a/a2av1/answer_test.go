package a2av1

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// An answer is read leniently (unknown fields ignored, as the JavaScript
// SDK's extra fields are), but what agentd needs of it is checked.
func TestDecodeAnswers(t *testing.T) {
	task, err := DecodeTask([]byte(`{"id":"t1","contextId":"c","kind":"task","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-06T23:31:30.589Z","x":1},
		"artifacts":[{"artifactId":"a","parts":[{"text":"echo: hi","mediaType":"text/plain","future":true}]}],
		"history":[{"messageId":"m1","role":"ROLE_USER","parts":[{"data":[1,2]}]}],"metadata":{"agentd/status":"completed"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "t1" || task.Status.State != a2a.TaskStateCompleted || task.Status.Timestamp == nil || task.Artifacts[0].Parts[0].(a2a.TextPart).Text != "echo: hi" ||
		task.History[0].Parts[0].(a2a.DataPart).Data["value"] == nil || task.Metadata["agentd/status"] != "completed" {
		t.Fatalf("task %+v", task)
	}
	ev, err := DecodeEvent([]byte(`{"statusUpdate":{"taskId":"t1","contextId":"c","status":{"state":"TASK_STATE_CANCELED"}}}`))
	if st, ok := ev.(*a2a.TaskStatusUpdateEvent); err != nil || !ok || !st.Final || st.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("status update: %#v, %v", ev, err)
	}
	res, err := DecodeSendResult([]byte(`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"stateless"}]}}`))
	if m, ok := res.(*a2a.Message); err != nil || !ok || m.Parts[0].(a2a.TextPart).Text != "stateless" {
		t.Fatalf("message answer: %#v, %v", res, err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"status":{"state":"TASK_STATE_WORKING"}}`, "without an id"},
		{`{"id":"t","status":{"state":"TASK_STATE_BORED"}}`, "unknown value"},
		{`{"id":"t","status":{}}`, "is not a task state"},
		{`{"id":"t","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"parts":[{"text":"a","url":"b"}]}]}`, "exactly one of"},
		{`{"id":"t","status":{"state":"TASK_STATE_WORKING","timestamp":"yesterday"}}`, "RFC 3339"},
	} {
		if _, err := DecodeTask([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeTask(%s) = %v, want %q", tc.body, err, tc.want)
		}
	}
	if _, err := DecodeEvent([]byte(`{"task":{"id":"t","status":{"state":1}},"message":{"messageId":"m","role":2,"parts":[{"text":"x"}]}}`)); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Fatalf("an event with two members: %v", err)
	}
}

// SendParamsFrom: a non-blocking send asks to return immediately; the push
// config and the history length travel.
func TestSendParamsFrom(t *testing.T) {
	f, h := false, 3
	p := &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"}),
		Config: &a2a.MessageSendConfig{Blocking: &f, HistoryLength: &h, PushConfig: &a2a.PushConfig{URL: "http://h/"}}}
	r := SendParamsFrom(p)
	if !r.Configuration.ReturnImmediately || *r.Configuration.HistoryLength != 3 || r.Configuration.TaskPushNotificationConfig.URL != "http://h/" || r.Message.Role != RoleUser {
		t.Fatalf("request %+v", r)
	}
	back, err := SendParamsTo(r)
	if err != nil || *back.Config.Blocking || back.Message.ID != p.Message.ID {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// An agent's answer, whatever it holds, decodes to one event or an error,
// never a panic or both.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"task":{"id":"t","status":{"state":"TASK_STATE_WORKING"},"artifacts":[{"artifactId":"a","parts":[{"text":"x"}]}]}}`,
		`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"data":{"k":1}},{"raw":"aGk="},{"url":"http://x/f"}]}}`,
		`{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-01-01T00:00:00Z"}}}`,
		`{"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"a","parts":[]},"append":true}}`,
		`{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeEvent(raw)
		if (err == nil) == (ev == nil) {
			t.Fatalf("DecodeEvent(%q) = %#v, %v: want exactly one of an event and an error", raw, ev, err)
		}
		if _, err := DecodeTask(raw); err != nil && !strings.HasPrefix(err.Error(), "a2av1: ") {
			t.Fatalf("DecodeTask(%q): %v lacks the package prefix", raw, err)
		}
	})
}
