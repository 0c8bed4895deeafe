package a2agrpc

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/a2av1"
)

// The conversions between the protobuf messages of the gRPC binding and
// a2av1's values, the 1.0 data model as the JSON-RPC binding reads and writes
// it: a gRPC request becomes the same a2av1 request a JSON-RPC one does, so
// both meet the same checks and the same conversion to a2a-go's 0.3 types.
// Struct and Value fields become the maps and JSON a2av1 holds; timestamps,
// RFC 3339 strings.

// structMap is a Struct as a map; nil for an absent one.
func structMap(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}

// toStruct is a map as a Struct; nil for an empty one. A value structpb does
// not take (a typed slice, a struct) is taken as encoding/json writes it.
func toStruct(m map[string]any) (*structpb.Struct, error) {
	if len(m) == 0 {
		return nil, nil
	}
	s, err := structpb.NewStruct(m)
	if err == nil {
		return s, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var plain map[string]any
	if err := json.Unmarshal(b, &plain); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return structpb.NewStruct(plain)
}

// timestamp is a Timestamp as RFC 3339; "" for an absent one.
func timestamp(t *timestamppb.Timestamp) (string, error) {
	if t == nil {
		return "", nil
	}
	if err := t.CheckValid(); err != nil {
		return "", &a2av1.FieldError{Reason: err.Error()}
	}
	return t.AsTime().UTC().Format(time.RFC3339Nano), nil
}

// toTimestamp is an RFC 3339 timestamp as a Timestamp; nil for "".
func toTimestamp(s string) (*timestamppb.Timestamp, error) {
	t, err := a2av1.ParseTimestamp(s)
	if err != nil || t.IsZero() {
		return nil, err
	}
	return timestamppb.New(t), nil
}

func optInt(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

func toOptInt(p *int) *int32 {
	if p == nil {
		return nil
	}
	v := int32(*p)
	return &v
}

var (
	roleNames = map[a2apb.Role]a2av1.Role{
		a2apb.Role_ROLE_UNSPECIFIED: a2av1.RoleUnspecified,
		a2apb.Role_ROLE_USER:        a2av1.RoleUser,
		a2apb.Role_ROLE_AGENT:       a2av1.RoleAgent,
	}
	stateNames = map[a2apb.TaskState]a2av1.TaskState{
		a2apb.TaskState_TASK_STATE_UNSPECIFIED:    a2av1.StateUnspecified,
		a2apb.TaskState_TASK_STATE_SUBMITTED:      a2av1.StateSubmitted,
		a2apb.TaskState_TASK_STATE_WORKING:        a2av1.StateWorking,
		a2apb.TaskState_TASK_STATE_COMPLETED:      a2av1.StateCompleted,
		a2apb.TaskState_TASK_STATE_FAILED:         a2av1.StateFailed,
		a2apb.TaskState_TASK_STATE_CANCELED:       a2av1.StateCanceled,
		a2apb.TaskState_TASK_STATE_INPUT_REQUIRED: a2av1.StateInputRequired,
		a2apb.TaskState_TASK_STATE_REJECTED:       a2av1.StateRejected,
		a2apb.TaskState_TASK_STATE_AUTH_REQUIRED:  a2av1.StateAuthRequired,
	}
)

// role is a Role by name; a number outside the enum is refused.
func role(r a2apb.Role) (a2av1.Role, error) {
	if v, ok := roleNames[r]; ok {
		return v, nil
	}
	return "", &a2av1.FieldError{Path: "role", Reason: fmt.Sprintf("unknown role %d", r)}
}

func toRole(r a2av1.Role) a2apb.Role {
	for k, v := range roleNames {
		if v == r {
			return k
		}
	}
	return a2apb.Role_ROLE_UNSPECIFIED
}

// State is a TaskState by name; a number outside the enum is refused.
func State(s a2apb.TaskState) (a2av1.TaskState, error) {
	if v, ok := stateNames[s]; ok {
		return v, nil
	}
	return "", &a2av1.FieldError{Path: "status", Reason: fmt.Sprintf("unknown task state %d", s)}
}

// ToState is a TaskState by number; "" is unspecified.
func ToState(s a2av1.TaskState) a2apb.TaskState {
	for k, v := range stateNames {
		if v == s {
			return k
		}
	}
	return a2apb.TaskState_TASK_STATE_UNSPECIFIED
}

// Part converts one part; the content is copied, whichever it is.
func Part(p *a2apb.Part) (a2av1.Part, error) {
	out := a2av1.Part{Metadata: structMap(p.GetMetadata()), Filename: p.GetFilename(), MediaType: p.GetMediaType()}
	switch c := p.GetContent().(type) {
	case *a2apb.Part_Text:
		t := c.Text
		out.Text = &t
	case *a2apb.Part_Raw:
		b := a2av1.Bytes(c.Raw)
		out.Raw = &b
	case *a2apb.Part_Url:
		u := c.Url
		out.URL = &u
	case *a2apb.Part_Data:
		b, err := json.Marshal(c.Data.AsInterface())
		if err != nil {
			return a2av1.Part{}, &a2av1.FieldError{Path: "data", Reason: err.Error()}
		}
		out.Data = b
	}
	return out, nil
}

// ToPart converts one part.
func ToPart(p a2av1.Part) (*a2apb.Part, error) {
	meta, err := toStruct(p.Metadata)
	if err != nil {
		return nil, err
	}
	out := &a2apb.Part{Metadata: meta, Filename: p.Filename, MediaType: p.MediaType}
	switch {
	case p.Text != nil:
		out.Content = &a2apb.Part_Text{Text: *p.Text}
	case p.Raw != nil:
		out.Content = &a2apb.Part_Raw{Raw: *p.Raw}
	case p.URL != nil:
		out.Content = &a2apb.Part_Url{Url: *p.URL}
	case len(p.Data) > 0:
		var v any
		if err := json.Unmarshal(p.Data, &v); err != nil {
			return nil, fmt.Errorf("data part: %w", err)
		}
		val, err := structpb.NewValue(v)
		if err != nil {
			return nil, fmt.Errorf("data part: %w", err)
		}
		out.Content = &a2apb.Part_Data{Data: val}
	}
	return out, nil
}

func parts(in []*a2apb.Part) ([]a2av1.Part, error) {
	out := make([]a2av1.Part, 0, len(in))
	for i, p := range in {
		v, err := Part(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func toParts(in []a2av1.Part) ([]*a2apb.Part, error) {
	out := make([]*a2apb.Part, 0, len(in))
	for _, p := range in {
		v, err := ToPart(p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Message converts a message; nil is nil.
func Message(m *a2apb.Message) (*a2av1.Message, error) {
	if m == nil {
		return nil, nil
	}
	r, err := role(m.GetRole())
	if err != nil {
		return nil, err
	}
	ps, err := parts(m.GetParts())
	if err != nil {
		return nil, err
	}
	return &a2av1.Message{
		MessageID: m.GetMessageId(), ContextID: m.GetContextId(), TaskID: m.GetTaskId(), Role: r, Parts: ps,
		Metadata: structMap(m.GetMetadata()), Extensions: m.GetExtensions(), ReferenceTaskIDs: m.GetReferenceTaskIds(),
	}, nil
}

// ToMessage converts a message; nil is nil.
func ToMessage(m *a2av1.Message) (*a2apb.Message, error) {
	if m == nil {
		return nil, nil
	}
	ps, err := toParts(m.Parts)
	if err != nil {
		return nil, err
	}
	meta, err := toStruct(m.Metadata)
	if err != nil {
		return nil, err
	}
	return &a2apb.Message{
		MessageId: m.MessageID, ContextId: m.ContextID, TaskId: m.TaskID, Role: toRole(m.Role), Parts: ps,
		Metadata: meta, Extensions: m.Extensions, ReferenceTaskIds: m.ReferenceTaskIDs,
	}, nil
}

func taskStatus(s *a2apb.TaskStatus) (a2av1.TaskStatus, error) {
	st, err := State(s.GetState())
	if err != nil {
		return a2av1.TaskStatus{}, err
	}
	msg, err := Message(s.GetMessage())
	if err != nil {
		return a2av1.TaskStatus{}, err
	}
	ts, err := timestamp(s.GetTimestamp())
	if err != nil {
		return a2av1.TaskStatus{}, err
	}
	return a2av1.TaskStatus{State: st, Message: msg, Timestamp: ts}, nil
}

func toStatus(s a2av1.TaskStatus) (*a2apb.TaskStatus, error) {
	msg, err := ToMessage(s.Message)
	if err != nil {
		return nil, err
	}
	ts, err := toTimestamp(s.Timestamp)
	if err != nil {
		return nil, err
	}
	return &a2apb.TaskStatus{State: ToState(s.State), Message: msg, Timestamp: ts}, nil
}

func artifact(a *a2apb.Artifact) (a2av1.Artifact, error) {
	ps, err := parts(a.GetParts())
	if err != nil {
		return a2av1.Artifact{}, err
	}
	return a2av1.Artifact{
		ArtifactID: a.GetArtifactId(), Name: a.GetName(), Description: a.GetDescription(), Parts: ps,
		Metadata: structMap(a.GetMetadata()), Extensions: a.GetExtensions(),
	}, nil
}

func toArtifact(a a2av1.Artifact) (*a2apb.Artifact, error) {
	ps, err := toParts(a.Parts)
	if err != nil {
		return nil, err
	}
	meta, err := toStruct(a.Metadata)
	if err != nil {
		return nil, err
	}
	return &a2apb.Artifact{ArtifactId: a.ArtifactID, Name: a.Name, Description: a.Description, Parts: ps, Metadata: meta, Extensions: a.Extensions}, nil
}

// Task converts a task.
func Task(t *a2apb.Task) (*a2av1.Task, error) {
	st, err := taskStatus(t.GetStatus())
	if err != nil {
		return nil, err
	}
	out := &a2av1.Task{ID: t.GetId(), ContextID: t.GetContextId(), Status: st, Metadata: structMap(t.GetMetadata())}
	for _, a := range t.GetArtifacts() {
		v, err := artifact(a)
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, v)
	}
	for _, m := range t.GetHistory() {
		v, err := Message(m)
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, *v)
	}
	return out, nil
}

// ToTask converts a task.
func ToTask(t *a2av1.Task) (*a2apb.Task, error) {
	st, err := toStatus(t.Status)
	if err != nil {
		return nil, err
	}
	meta, err := toStruct(t.Metadata)
	if err != nil {
		return nil, err
	}
	out := &a2apb.Task{Id: t.ID, ContextId: t.ContextID, Status: st, Metadata: meta}
	for _, a := range t.Artifacts {
		v, err := toArtifact(a)
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, v)
	}
	for i := range t.History {
		v, err := ToMessage(&t.History[i])
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, v)
	}
	return out, nil
}

// ToStreamResponse converts one event of a stream.
func ToStreamResponse(ev a2av1.StreamResponse) (*a2apb.StreamResponse, error) {
	switch {
	case ev.Task != nil:
		t, err := ToTask(ev.Task)
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Task{Task: t}}, err
	case ev.Message != nil:
		m, err := ToMessage(ev.Message)
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_Message{Message: m}}, err
	case ev.StatusUpdate != nil:
		u := ev.StatusUpdate
		st, err := toStatus(u.Status)
		if err != nil {
			return nil, err
		}
		meta, err := toStruct(u.Metadata)
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_StatusUpdate{StatusUpdate: &a2apb.TaskStatusUpdateEvent{
			TaskId: u.TaskID, ContextId: u.ContextID, Status: st, Metadata: meta,
		}}}, err
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		a, err := toArtifact(u.Artifact)
		if err != nil {
			return nil, err
		}
		meta, err := toStruct(u.Metadata)
		return &a2apb.StreamResponse{Payload: &a2apb.StreamResponse_ArtifactUpdate{ArtifactUpdate: &a2apb.TaskArtifactUpdateEvent{
			TaskId: u.TaskID, ContextId: u.ContextID, Artifact: a, Append: u.Append, LastChunk: u.LastChunk, Metadata: meta,
		}}}, err
	}
	return nil, fmt.Errorf("an empty stream event")
}

// StreamResponse converts one event of a stream.
func StreamResponse(ev *a2apb.StreamResponse) (a2av1.StreamResponse, error) {
	switch p := ev.GetPayload().(type) {
	case *a2apb.StreamResponse_Task:
		t, err := Task(p.Task)
		return a2av1.StreamResponse{Task: t}, err
	case *a2apb.StreamResponse_Message:
		m, err := Message(p.Message)
		return a2av1.StreamResponse{Message: m}, err
	case *a2apb.StreamResponse_StatusUpdate:
		st, err := taskStatus(p.StatusUpdate.GetStatus())
		return a2av1.StreamResponse{StatusUpdate: &a2av1.TaskStatusUpdateEvent{
			TaskID: p.StatusUpdate.GetTaskId(), ContextID: p.StatusUpdate.GetContextId(), Status: st, Metadata: structMap(p.StatusUpdate.GetMetadata()),
		}}, err
	case *a2apb.StreamResponse_ArtifactUpdate:
		u := p.ArtifactUpdate
		a, err := artifact(u.GetArtifact())
		return a2av1.StreamResponse{ArtifactUpdate: &a2av1.TaskArtifactUpdateEvent{
			TaskID: u.GetTaskId(), ContextID: u.GetContextId(), Artifact: a, Append: u.GetAppend(), LastChunk: u.GetLastChunk(), Metadata: structMap(u.GetMetadata()),
		}}, err
	}
	return a2av1.StreamResponse{}, fmt.Errorf("a stream event with no payload")
}

// PushConfig converts a webhook registration; nil is nil.
func PushConfig(c *a2apb.TaskPushNotificationConfig) *a2av1.TaskPushNotificationConfig {
	if c == nil {
		return nil
	}
	out := &a2av1.TaskPushNotificationConfig{Tenant: c.GetTenant(), ID: c.GetId(), TaskID: c.GetTaskId(), URL: c.GetUrl(), Token: c.GetToken()}
	if a := c.GetAuthentication(); a != nil {
		out.Authentication = &a2av1.AuthenticationInfo{Scheme: a.GetScheme(), Credentials: a.GetCredentials()}
	}
	return out
}

// ToPushConfig converts a webhook registration.
func ToPushConfig(c a2av1.TaskPushNotificationConfig) *a2apb.TaskPushNotificationConfig {
	out := &a2apb.TaskPushNotificationConfig{Tenant: c.Tenant, Id: c.ID, TaskId: c.TaskID, Url: c.URL, Token: c.Token}
	if c.Authentication != nil {
		out.Authentication = &a2apb.AuthenticationInfo{Scheme: c.Authentication.Scheme, Credentials: c.Authentication.Credentials}
	}
	return out
}

// SendRequest converts the request of SendMessage and SendStreamingMessage.
func SendRequest(r *a2apb.SendMessageRequest) (*a2av1.SendMessageRequest, error) {
	msg, err := Message(r.GetMessage())
	if err != nil {
		return nil, fmt.Errorf("message: %w", err)
	}
	out := &a2av1.SendMessageRequest{Tenant: r.GetTenant(), Message: msg, Metadata: structMap(r.GetMetadata())}
	if c := r.GetConfiguration(); c != nil {
		out.Configuration = &a2av1.SendMessageConfiguration{
			AcceptedOutputModes:        c.GetAcceptedOutputModes(),
			TaskPushNotificationConfig: PushConfig(c.GetTaskPushNotificationConfig()),
			HistoryLength:              optInt(c.HistoryLength),
			ReturnImmediately:          c.GetReturnImmediately(),
		}
	}
	return out, nil
}

// ToSendRequest converts the request of SendMessage and SendStreamingMessage.
func ToSendRequest(r *a2av1.SendMessageRequest) (*a2apb.SendMessageRequest, error) {
	msg, err := ToMessage(r.Message)
	if err != nil {
		return nil, err
	}
	meta, err := toStruct(r.Metadata)
	if err != nil {
		return nil, err
	}
	out := &a2apb.SendMessageRequest{Tenant: r.Tenant, Message: msg, Metadata: meta}
	if c := r.Configuration; c != nil {
		out.Configuration = &a2apb.SendMessageConfiguration{
			AcceptedOutputModes: c.AcceptedOutputModes,
			HistoryLength:       toOptInt(c.HistoryLength),
			ReturnImmediately:   c.ReturnImmediately,
		}
		if c.TaskPushNotificationConfig != nil {
			out.Configuration.TaskPushNotificationConfig = ToPushConfig(*c.TaskPushNotificationConfig)
		}
	}
	return out, nil
}

// ListTasksRequest converts the request of ListTasks.
func ListTasksRequest(r *a2apb.ListTasksRequest) (*a2av1.ListTasksRequest, error) {
	st, err := State(r.GetStatus())
	if err != nil {
		return nil, err
	}
	after, err := timestamp(r.GetStatusTimestampAfter())
	if err != nil {
		return nil, err
	}
	return &a2av1.ListTasksRequest{
		Tenant: r.GetTenant(), ContextID: r.GetContextId(), Status: st, PageSize: optInt(r.PageSize),
		PageToken: r.GetPageToken(), HistoryLength: optInt(r.HistoryLength), StatusTimestampAfter: after,
		IncludeArtifacts: r.IncludeArtifacts,
	}, nil
}
