package a2abind

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

func TestStateOf(t *testing.T) {
	want := map[api.TerminalStatus]a2a.TaskState{
		api.StatusCompleted:       a2a.TaskStateCompleted,
		api.StatusRefused:         a2a.TaskStateRejected,
		api.StatusCancelled:       a2a.TaskStateCanceled,
		api.StatusExhaustedSteps:  a2a.TaskStateFailed,
		api.StatusExhaustedTokens: a2a.TaskStateFailed,
		api.StatusDeadline:        a2a.TaskStateFailed,
		api.StatusStalled:         a2a.TaskStateFailed,
		api.StatusLoopDetected:    a2a.TaskStateFailed,
		api.StatusCrashed:         a2a.TaskStateFailed,
	}
	for _, s := range api.TerminalStatuses {
		if got := StateOf(s); got != want[s] {
			t.Errorf("TaskState(%s) = %s, want %s", s, got, want[s])
		}
	}
}

func TestDistillateArtifact(t *testing.T) {
	text := DistillateArtifact("t1", api.SubagentResult{Distillate: api.InlineText("hi")})
	if text.ID != "t1.distillate" || text.Parts[0].(a2a.TextPart).Text != "hi" {
		t.Fatalf("text: %+v", text)
	}
	obj := DistillateArtifact("t1", api.SubagentResult{Distillate: api.ResultBody{Inline: json.RawMessage(`{"n":1}`)}})
	if obj.Parts[0].(a2a.DataPart).Data["n"] != float64(1) {
		t.Fatalf("object: %+v", obj)
	}
	arr := DistillateArtifact("t1", api.SubagentResult{Distillate: api.ResultBody{Inline: json.RawMessage(`[1,2]`)}})
	if _, ok := arr.Parts[0].(a2a.DataPart).Data["value"]; !ok {
		t.Fatalf("array: %+v", arr)
	}
	ref := DistillateArtifact("t1", api.SubagentResult{Distillate: api.ResultBody{Reference: &api.Reference{URI: "https://x/blob/1", Summary: "sum"}}})
	if ref.Parts[0].(a2a.FilePart).File.(a2a.FileURI).URI != "https://x/blob/1" || ref.Parts[1].(a2a.TextPart).Text != "sum" {
		t.Fatalf("reference: %+v", ref)
	}
}

func TestPublicBlobURL(t *testing.T) {
	for _, tc := range []struct{ base, uri, want string }{
		{"http://127.0.0.1:8080/", "agent://blob/abc", "http://127.0.0.1:8080/blobs/abc"},
		{"https://agentd.example/a2a", "agent://blob/abc", "https://agentd.example/a2a/blobs/abc"},
		{"https://agentd.example/?x=1", "agent://blob/abc", "https://agentd.example/blobs/abc"},
		{"", "agent://blob/abc", "agent://blob/abc"},
		{"http://h/", "https://elsewhere/x", "https://elsewhere/x"},
		{"http://h/", "agent://blob/../x", "agent://blob/../x"},
		{"not a url", "agent://blob/abc", "agent://blob/abc"},
	} {
		if got := PublicBlobURL(tc.base, tc.uri); got != tc.want {
			t.Errorf("PublicBlobURL(%q, %q) = %q, want %q", tc.base, tc.uri, got, tc.want)
		}
	}
	art := DistillateArtifactAt("t1", api.SubagentResult{Distillate: api.ResultBody{Reference: &api.Reference{URI: "agent://blob/b1", Summary: "sum"}}}, "http://h:1/")
	if art.Parts[0].(a2a.FilePart).File.(a2a.FileURI).URI != "http://h:1/blobs/b1" {
		t.Fatalf("file part: %+v", art.Parts[0])
	}
}

func TestResultFromTask(t *testing.T) {
	failed := &a2a.Task{ID: "r", Status: a2a.TaskStatus{State: a2a.TaskStateFailed, Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "boom"})}}
	if res := ResultFromTask(failed, false); res.Status != api.StatusCrashed || res.Detail != "boom" {
		t.Fatalf("%+v", res)
	}
	failed.Metadata = map[string]any{api.MetaStatus: "deadline"}
	if res := ResultFromTask(failed, true); res.Status != api.StatusDeadline {
		t.Fatalf("exact status from an agentd peer: %+v", res)
	}
	if res := ResultFromTask(failed, false); res.Status != api.StatusCrashed {
		t.Fatal("a plain peer's metadata was trusted for the status")
	}
	for state, want := range map[a2a.TaskState]api.TerminalStatus{
		a2a.TaskStateRejected: api.StatusRefused, a2a.TaskStateCanceled: api.StatusCancelled,
		a2a.TaskStateInputRequired: api.StatusRefused, a2a.TaskStateCompleted: api.StatusCompleted,
	} {
		if got := ResultFromTask(&a2a.Task{Status: a2a.TaskStatus{State: state}}, false).Status; got != want {
			t.Errorf("%s -> %s, want %s", state, got, want)
		}
	}
	ref := &a2a.Task{ID: "r", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}, Artifacts: []*a2a.Artifact{
		{ID: "other", Parts: a2a.ContentParts{a2a.TextPart{Text: "noise"}}},
		DistillateArtifact("r", api.SubagentResult{Distillate: api.ResultBody{Reference: &api.Reference{URI: "https://s/1", Summary: "sum"}}}),
	}}
	if res := ResultFromTask(ref, true); res.Distillate.Reference == nil || res.Distillate.Reference.URI != "https://s/1" || res.Distillate.Reference.Summary != "sum" {
		t.Fatalf("reference: %+v", res.Distillate)
	}
}
