package a2av1

import (
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// What a client sends comes out of the server's conversion as it went in.
func TestSendParamsFromRoundTrip(t *testing.T) {
	no, hist := false, 3
	in := &a2a.MessageSendParams{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"}, a2a.DataPart{Data: map[string]any{"k": "v"}}),
		Metadata: map[string]any{"m": "x"},
		Config: &a2a.MessageSendConfig{Blocking: &no, HistoryLength: &hist, AcceptedOutputModes: []string{"text/plain"},
			PushConfig: &a2a.PushConfig{ID: "p", URL: "https://hook.example/", Token: "t"}},
	}
	out, err := SendParamsTo(SendParamsFrom(in))
	if err != nil {
		t.Fatal(err)
	}
	if out.Message.ID != in.Message.ID || len(out.Message.Parts) != 2 || out.Metadata["m"] != "x" {
		t.Fatalf("message: %+v", out)
	}
	c := out.Config
	if *c.Blocking || *c.HistoryLength != 3 || c.AcceptedOutputModes[0] != "text/plain" || c.PushConfig.URL != "https://hook.example/" || c.PushConfig.ID != "p" {
		t.Fatalf("config: %+v %+v", c, c.PushConfig)
	}
	// No configuration: a blocking send.
	out, err = SendParamsTo(SendParamsFrom(&a2a.MessageSendParams{Message: in.Message}))
	if err != nil || !*out.Config.Blocking {
		t.Fatalf("default send: %+v %v", out, err)
	}
}

func TestTaskAndEventTo(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now},
		Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "q"})}}
	got, err := TaskTo(TaskFrom(task, true))
	if err != nil || got.ID != "t" || got.Status.State != a2a.TaskStateWorking || !got.Status.Timestamp.Equal(now) || len(got.Artifacts) != 1 || len(got.History) != 1 {
		t.Fatalf("task: %+v %v", got, err)
	}
	ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	sr := EventFrom(ev)
	back, err := EventTo(&sr)
	if u, ok := back.(*a2a.TaskStatusUpdateEvent); err != nil || !ok || u.Status.State != a2a.TaskStateCompleted || !u.Final {
		t.Fatalf("status update: %#v %v", back, err)
	}
	for _, bad := range []StreamResponse{{}, {Task: TaskFrom(task, false), Message: MessageFrom(task.History[0])}} {
		if _, err := EventTo(&bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("EventTo(%+v): %v", bad, err)
		}
	}
	if _, err := TaskTo(&Task{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a task without an id: %v", err)
	}
	if _, err := SendResultTo(&SendMessageResponse{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an empty send response: %v", err)
	}
}
