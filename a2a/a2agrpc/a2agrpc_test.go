package a2agrpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/a2av1"
)

func TestTarget(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example:8443/":     "a.example:8443",
		"https://a.example/a2a":       "a.example:443",
		"http://127.0.0.1:8080/":      "127.0.0.1:8080",
		"http://[::1]/":               "[::1]:80",
		"127.0.0.1:9000":              "127.0.0.1:9000",
		"a.example:50051":             "a.example:50051",
		"":                            "",
		"a.example":                   "",
		"ftp://a.example:21/":         "",
		"a.example:50051/path":        "",
		"unix:///var/run/agentd.sock": "",
	} {
		if got := Target(in); got != want {
			t.Errorf("Target(%q) = %q, want %q", in, got, want)
		}
	}
}

// errorInfo encodes a google.rpc.ErrorInfo as the server does.
func errorInfo(reason, domain string) *anypb.Any {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, reason)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, domain)
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, "detail")
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendString(e, "why")
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, e)
	return &anypb.Any{TypeUrl: ErrorInfoType, Value: b}
}

// A status answers as the a2a-go sentinel of its ErrorInfo's reason in the
// A2A domain, else of its code; RetryInfo gives RetryAfter.
func TestStatusErrors(t *testing.T) {
	retry := &anypb.Any{TypeUrl: RetryInfoType, Value: protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8))}
	for _, c := range []struct {
		name    string
		st      *spb.Status
		want    error
		reason  string
		waitFor time.Duration
	}{
		{"task not found by reason", &spb.Status{Code: int32(codes.NotFound), Details: []*anypb.Any{errorInfo("TASK_NOT_FOUND", a2av1.ErrorDomain)}}, a2a.ErrTaskNotFound, "TASK_NOT_FOUND", 0},
		{"not cancelable", &spb.Status{Code: int32(codes.FailedPrecondition), Details: []*anypb.Any{errorInfo("TASK_NOT_CANCELABLE", a2av1.ErrorDomain)}}, a2a.ErrTaskNotCancelable, "TASK_NOT_CANCELABLE", 0},
		{"unsupported by reason, not by code", &spb.Status{Code: int32(codes.Unimplemented), Details: []*anypb.Any{errorInfo("UNSUPPORTED_OPERATION", a2av1.ErrorDomain)}}, a2a.ErrUnsupportedOperation, "UNSUPPORTED_OPERATION", 0},
		{"push not supported", &spb.Status{Code: int32(codes.Unimplemented), Details: []*anypb.Any{errorInfo("PUSH_NOTIFICATION_NOT_SUPPORTED", a2av1.ErrorDomain)}}, a2a.ErrPushNotificationNotSupported, "PUSH_NOTIFICATION_NOT_SUPPORTED", 0},
		{"shed", &spb.Status{Code: int32(codes.ResourceExhausted), Details: []*anypb.Any{errorInfo("RESOURCE_EXHAUSTED", a2av1.ShedDomain), retry}}, a2a.ErrServerError, "RESOURCE_EXHAUSTED", 8 * time.Second},
		{"unknown method, no details", &spb.Status{Code: int32(codes.Unimplemented)}, a2a.ErrMethodNotFound, "", 0},
		{"invalid argument, no details", &spb.Status{Code: int32(codes.InvalidArgument)}, a2a.ErrInvalidParams, "", 0},
		{"deadline", &spb.Status{Code: int32(codes.DeadlineExceeded)}, context.DeadlineExceeded, "", 0},
		{"garbage detail", &spb.Status{Code: int32(codes.NotFound), Details: []*anypb.Any{{TypeUrl: ErrorInfoType, Value: []byte{0xff, 0xff}}}}, a2a.ErrTaskNotFound, "", 0},
	} {
		err := StatusError("GetTask", status.FromProto(c.st).Err())
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, c.want) || e.Reason != c.reason || e.RetryAfter != c.waitFor {
			t.Errorf("%s: %v (%+v), want %v reason %q retry %s", c.name, err, e, c.want, c.reason, c.waitFor)
		}
	}
	if err := StatusError("GetTask", errors.New("dial: refused")); errors.As(err, new(*Error)) {
		t.Errorf("a non-status error became an *Error: %v", err)
	}
}

// A task, a message with every kind of part and the events survive the
// round trip a2av1 -> protobuf (wire bytes) -> a2av1 -> 0.3.
func TestConversionRoundTrip(t *testing.T) {
	text, url := "hi", "https://x.example/f"
	raw := a2av1.Bytes("raw bytes")
	msg := a2av1.Message{MessageID: "m1", ContextID: "c1", TaskID: "t1", Role: a2av1.RoleAgent, Metadata: map[string]any{"k": "v", "n": 2.5},
		Parts:            []a2av1.Part{{Text: &text}, {Raw: &raw, MediaType: "application/octet-stream", Filename: "f.bin"}, {URL: &url}, {Data: []byte(`{"a":[1,true,null]}`)}, {Data: []byte(`7`)}},
		ReferenceTaskIDs: []string{"t0"}}
	task := &a2av1.Task{ID: "t1", ContextID: "c1", Status: a2av1.TaskStatus{State: a2av1.StateCompleted, Message: &msg, Timestamp: "2026-01-02T03:04:05.006Z"},
		Artifacts: []a2av1.Artifact{{ArtifactID: "a1", Parts: msg.Parts}}, History: []a2av1.Message{msg}, Metadata: map[string]any{"agentd/status": "completed"}}
	pb, err := ToTask(task)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	var back a2apb.Task
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := answerTask("GetTask", &back)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "t1" || got.Status.State != a2a.TaskStateCompleted || got.Status.Timestamp == nil || got.Status.Timestamp.Nanosecond() != 6e6 ||
		len(got.Artifacts) != 1 || len(got.Artifacts[0].Parts) != 5 || len(got.History) != 1 || got.Metadata["agentd/status"] != "completed" {
		t.Fatalf("task back: %+v", got)
	}
	parts := got.History[0].Parts
	if parts[0].(a2a.TextPart).Text != "hi" || parts[1].(a2a.FilePart).File.(a2a.FileBytes).Name != "f.bin" ||
		parts[2].(a2a.FilePart).File.(a2a.FileURI).URI != url || parts[3].(a2a.DataPart).Data["a"] == nil ||
		parts[4].(a2a.DataPart).Data["value"] != 7.0 || got.History[0].Role != a2a.MessageRoleAgent || got.History[0].Metadata["n"] != 2.5 {
		t.Fatalf("parts back: %#v", got.History[0])
	}
	for _, ev := range []a2av1.StreamResponse{
		{StatusUpdate: &a2av1.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Status: a2av1.TaskStatus{State: a2av1.StateInputRequired}}},
		{ArtifactUpdate: &a2av1.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Artifact: a2av1.Artifact{ArtifactID: "a1", Parts: msg.Parts[:1]}, Append: true, LastChunk: true}},
		{Message: &msg},
	} {
		pb, err := ToStreamResponse(ev)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := StreamResponse(pb)
		if err != nil {
			t.Fatal(err)
		}
		e, err := event03(v1)
		if err != nil {
			t.Fatal(err)
		}
		switch v := e.(type) {
		case *a2a.TaskStatusUpdateEvent:
			if !v.Final || v.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("status update back: %+v (input-required ends a stream: final)", v)
			}
		case *a2a.TaskArtifactUpdateEvent:
			if !v.Append || !v.LastChunk || v.Artifact.ID != "a1" {
				t.Fatalf("artifact update back: %+v", v)
			}
		case *a2a.Message:
			if v.ID != "m1" {
				t.Fatalf("message back: %+v", v)
			}
		}
	}
	// A role or a state outside the enums is refused on the way in.
	if _, err := Message(&a2apb.Message{Role: 9}); !errors.Is(err, a2av1.ErrInvalid) {
		t.Fatalf("role 9: %v", err)
	}
}
