package a2av1

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

func TestStateMappingRoundTrips(t *testing.T) {
	for _, s := range []a2a.TaskState{
		a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateFailed,
		a2a.TaskStateCanceled, a2a.TaskStateInputRequired, a2a.TaskStateRejected, a2a.TaskStateAuthRequired,
	} {
		v := StateFrom(s)
		if !strings.HasPrefix(string(v), "TASK_STATE_") || v == StateUnspecified {
			t.Errorf("StateFrom(%s) = %s", s, v)
		}
		if back := StateTo(v); back != s {
			t.Errorf("StateTo(StateFrom(%s)) = %s", s, back)
		}
	}
	if StateFrom(a2a.TaskStateUnknown) != StateUnspecified {
		t.Error("unknown state is not unspecified")
	}
}

func TestEnumsDecodeByNameOrNumber(t *testing.T) {
	var s TaskState
	if err := json.Unmarshal([]byte(`"TASK_STATE_WORKING"`), &s); err != nil || s != StateWorking {
		t.Fatalf("by name: %s %v", s, err)
	}
	if err := json.Unmarshal([]byte(`3`), &s); err != nil || s != StateCompleted {
		t.Fatalf("by number: %s %v", s, err)
	}
	for _, bad := range []string{`"working"`, `9`, `-1`, `1.5`, `true`} {
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s accepted as a task state", bad)
		}
	}
	var r Role
	if err := json.Unmarshal([]byte(`"ROLE_AGENT"`), &r); err != nil || r != RoleAgent {
		t.Fatalf("role: %s %v", r, err)
	}
	if err := json.Unmarshal([]byte(`"agent"`), &r); err == nil {
		t.Fatal("0.3 role name accepted in 1.0")
	}
}

// TestTaskShape pins the proto3-JSON shape of a task: camelCase, enum names,
// RFC 3339 timestamps with milliseconds in UTC, parts without a kind.
func TestTaskShape(t *testing.T) {
	ts := time.Date(2025, 10, 28, 10, 30, 0, 123456789, time.FixedZone("x", 3600))
	task := &a2a.Task{
		ID: "t1", ContextID: "c1",
		Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &ts},
		History: []*a2a.Message{{ID: "m1", Role: a2a.MessageRoleUser, TaskID: "t1", Parts: a2a.ContentParts{
			a2a.TextPart{Text: "hi"},
			a2a.FilePart{File: a2a.FileURI{URI: "https://x/f", FileMeta: a2a.FileMeta{MimeType: "text/plain", Name: "f.txt"}}},
			a2a.FilePart{File: a2a.FileBytes{Bytes: "aGk="}},
		}}},
		Artifacts: []*a2a.Artifact{{ID: "t1.distillate", Parts: a2a.ContentParts{a2a.DataPart{Data: map[string]any{"n": 1.0}}}}},
	}
	b, err := json.Marshal(TaskFrom(task, true))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		`"state":"TASK_STATE_COMPLETED"`, `"timestamp":"2025-10-28T09:30:00.123Z"`, `"role":"ROLE_USER"`,
		`"contextId":"c1"`, `"messageId":"m1"`, `{"text":"hi"}`, `"url":"https://x/f"`, `"mediaType":"text/plain"`,
		`"filename":"f.txt"`, `"raw":"aGk="`, `"artifactId":"t1.distillate"`, `"data":{"n":1}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("task JSON lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"kind"`) {
		t.Errorf("1.0 JSON carries a 0.3 kind:\n%s", got)
	}
	b, _ = json.Marshal(TaskFrom(task, false))
	if strings.Contains(string(b), "artifacts") {
		t.Errorf("artifacts present when left out:\n%s", b)
	}
}

func TestEventShapes(t *testing.T) {
	ev := a2a.NewStatusUpdateEvent(&a2a.Task{ID: "t", ContextID: "c"}, a2a.TaskStateWorking, nil)
	b, _ := json.Marshal(EventFrom(ev))
	if !strings.HasPrefix(string(b), `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"`) {
		t.Fatalf("status update: %s", b)
	}
	art := &a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}, LastChunk: true}
	b, _ = json.Marshal(EventFrom(art))
	if !strings.HasPrefix(string(b), `{"artifactUpdate":{"taskId":"t","contextId":"c","artifact":{"artifactId":"a","parts":[{"text":"x"}]},"lastChunk":true`) {
		t.Fatalf("artifact update: %s", b)
	}
	b, _ = json.Marshal(EventFrom(&a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}))
	if !strings.HasPrefix(string(b), `{"task":{"id":"t"`) {
		t.Fatalf("task: %s", b)
	}
}

func TestSendParamsTo(t *testing.T) {
	var req SendMessageRequest
	body := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a"},{"data":[1,2]},{"raw":"aGk"},{"url":"https://x/f","mediaType":"image/png"}],"referenceTaskIds":["t0"]},
	  "configuration":{"returnImmediately":true,"historyLength":2,"taskPushNotificationConfig":{"url":"https://hook/x","token":"tok","authentication":{"scheme":"Bearer","credentials":"c"}}}}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	p, err := SendParamsTo(&req)
	if err != nil {
		t.Fatal(err)
	}
	if *p.Config.Blocking || *p.Config.HistoryLength != 2 || p.Config.PushConfig.Token != "tok" || p.Config.PushConfig.Auth.Schemes[0] != "Bearer" {
		t.Fatalf("config: %+v", p.Config)
	}
	m := p.Message
	if m.Role != a2a.MessageRoleUser || len(m.Parts) != 4 || m.ReferenceTasks[0] != "t0" {
		t.Fatalf("message: %+v", m)
	}
	data := m.Parts[1].(a2a.DataPart)
	if data.Metadata[api.MetaWrapped] != true || len(data.Data["value"].([]any)) != 2 {
		t.Fatalf("non-object data: %+v", data)
	}
	if raw := m.Parts[2].(a2a.FilePart).File.(a2a.FileBytes); raw.Bytes != "aGk=" {
		t.Fatalf("raw: %+v", raw)
	}
	// And back: the wrapped value comes out as it went in.
	parts := PartsFrom(m.Parts)
	if string(parts[1].Data) != "[1,2]" || parts[1].Metadata != nil {
		t.Fatalf("unwrapped data: %s %v", parts[1].Data, parts[1].Metadata)
	}
	blocking := SendMessageRequest{Message: req.Message}
	if p, _ := SendParamsTo(&blocking); !*p.Config.Blocking {
		t.Fatal("an unset returnImmediately is not blocking")
	}
}

func TestMessageToRefusesBadInput(t *testing.T) {
	text := "x"
	url := ""
	for name, m := range map[string]*Message{
		"nil":         nil,
		"no id":       {Role: RoleUser, Parts: []Part{{Text: &text}}},
		"no role":     {MessageID: "m", Parts: []Part{{Text: &text}}},
		"no parts":    {MessageID: "m", Role: RoleUser},
		"empty part":  {MessageID: "m", Role: RoleUser, Parts: []Part{{}}},
		"two kinds":   {MessageID: "m", Role: RoleUser, Parts: []Part{{Text: &text, Data: json.RawMessage(`{}`)}}},
		"null data":   {MessageID: "m", Role: RoleUser, Parts: []Part{{Data: json.RawMessage(`null`)}}},
		"empty url":   {MessageID: "m", Role: RoleUser, Parts: []Part{{URL: &url}}},
		"unspecified": {MessageID: "m", Role: RoleUnspecified, Parts: []Part{{Text: &text}}},
	} {
		if _, err := MessageTo(m); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestErrorData(t *testing.T) {
	d := ErrorData(-32001, "task x")
	info := d[0].(ErrorInfo)
	if info.Reason != "TASK_NOT_FOUND" || info.Domain != ErrorDomain || info.Type != "type.googleapis.com/google.rpc.ErrorInfo" || info.Metadata["detail"] != "task x" {
		t.Fatalf("%+v", info)
	}
	if ErrorData(-32601, "") != nil {
		t.Fatal("a standard error without detail has data")
	}
}

// FuzzSendMessageRequest decodes and converts arbitrary SendMessage params:
// never a panic, and a converted message always has an id, a role and parts.
func FuzzSendMessageRequest(f *testing.F) {
	for _, s := range []string{
		`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}`,
		`{"message":{"messageId":"m","role":1,"parts":[{"data":{"a":[1]}},{"raw":"AAE"}]},"configuration":{"returnImmediately":true}}`,
		`{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"url":"https://x","filename":"f"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://h","authentication":{"scheme":"Basic"}}}}`,
		`{"message":null}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req SendMessageRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		p, err := SendParamsTo(&req)
		if err != nil {
			return
		}
		m := p.Message
		if m.ID == "" || (m.Role != a2a.MessageRoleUser && m.Role != a2a.MessageRoleAgent) || len(m.Parts) == 0 {
			t.Fatalf("converted an invalid message: %+v", m)
		}
		if _, err := json.Marshal(PartsFrom(m.Parts)); err != nil {
			t.Fatalf("parts do not encode back: %v", err)
		}
	})
}
