package a2av1

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// Bytes is a proto bytes field: standard base64 on output; standard or
// URL-safe, padded or not, on input.
type Bytes []byte

// MarshalJSON encodes standard padded base64.
func (b Bytes) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// UnmarshalJSON accepts every base64 alphabet proto3 JSON parsers accept.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	dec, err := decodeBase64(s)
	if err != nil {
		return fmt.Errorf("bytes: %w", err)
	}
	*b = dec
	return nil
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Timestamp formats t as an RFC 3339 UTC timestamp with milliseconds; the zero
// time is "".
func Timestamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ParseTimestamp parses an RFC 3339 timestamp; "" is the zero time.
func ParseTimestamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q: want RFC 3339", s)
	}
	return t, nil
}

// StateFrom maps a 0.3 task state to its 1.0 enum value.
func StateFrom(s a2a.TaskState) TaskState {
	switch s {
	case a2a.TaskStateSubmitted:
		return StateSubmitted
	case a2a.TaskStateWorking:
		return StateWorking
	case a2a.TaskStateCompleted:
		return StateCompleted
	case a2a.TaskStateFailed:
		return StateFailed
	case a2a.TaskStateCanceled:
		return StateCanceled
	case a2a.TaskStateInputRequired:
		return StateInputRequired
	case a2a.TaskStateRejected:
		return StateRejected
	case a2a.TaskStateAuthRequired:
		return StateAuthRequired
	}
	return StateUnspecified
}

// StateTo maps a 1.0 task state to the 0.3 one; unspecified maps to "".
func StateTo(s TaskState) a2a.TaskState {
	switch s {
	case StateSubmitted:
		return a2a.TaskStateSubmitted
	case StateWorking:
		return a2a.TaskStateWorking
	case StateCompleted:
		return a2a.TaskStateCompleted
	case StateFailed:
		return a2a.TaskStateFailed
	case StateCanceled:
		return a2a.TaskStateCanceled
	case StateInputRequired:
		return a2a.TaskStateInputRequired
	case StateRejected:
		return a2a.TaskStateRejected
	case StateAuthRequired:
		return a2a.TaskStateAuthRequired
	}
	return a2a.TaskStateUnspecified
}

func roleFrom(r a2a.MessageRole) Role {
	switch r {
	case a2a.MessageRoleUser:
		return RoleUser
	case a2a.MessageRoleAgent:
		return RoleAgent
	}
	return RoleUnspecified
}

// TaskFrom converts a task. Artifacts are left out unless withArtifacts; the
// snapshot is read, never modified.
func TaskFrom(t *a2a.Task, withArtifacts bool) *Task {
	out := &Task{
		ID:        string(t.ID),
		ContextID: t.ContextID,
		Status:    statusFrom(t.Status),
		Metadata:  t.Metadata,
	}
	if withArtifacts {
		for _, a := range t.Artifacts {
			out.Artifacts = append(out.Artifacts, ArtifactFrom(a))
		}
	}
	for _, m := range t.History {
		out.History = append(out.History, *MessageFrom(m))
	}
	return out
}

func statusFrom(s a2a.TaskStatus) TaskStatus {
	out := TaskStatus{State: StateFrom(s.State), Timestamp: Timestamp(s.Timestamp)}
	if s.Message != nil {
		out.Message = MessageFrom(s.Message)
	}
	return out
}

// MessageFrom converts a message.
func MessageFrom(m *a2a.Message) *Message {
	out := &Message{
		MessageID:  m.ID,
		ContextID:  m.ContextID,
		TaskID:     string(m.TaskID),
		Role:       roleFrom(m.Role),
		Parts:      PartsFrom(m.Parts),
		Metadata:   m.Metadata,
		Extensions: m.Extensions,
	}
	for _, id := range m.ReferenceTasks {
		out.ReferenceTaskIDs = append(out.ReferenceTaskIDs, string(id))
	}
	return out
}

// ArtifactFrom converts an artifact.
func ArtifactFrom(a *a2a.Artifact) Artifact {
	return Artifact{
		ArtifactID:  string(a.ID),
		Name:        a.Name,
		Description: a.Description,
		Parts:       PartsFrom(a.Parts),
		Metadata:    a.Metadata,
		Extensions:  a.Extensions,
	}
}

// PartsFrom converts parts; a data part marked api.MetaWrapped is unwrapped.
func PartsFrom(parts a2a.ContentParts) []Part {
	out := make([]Part, 0, len(parts))
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			text := v.Text
			out = append(out, Part{Text: &text, Metadata: v.Metadata})
		case a2a.DataPart:
			meta := v.Metadata
			var value any = v.Data
			if w, _ := meta[api.MetaWrapped].(bool); w {
				value = v.Data["value"]
				meta = withoutKey(meta, api.MetaWrapped)
			}
			b, err := json.Marshal(value)
			if err != nil {
				b = []byte("null")
			}
			out = append(out, Part{Data: b, Metadata: meta})
		case a2a.FilePart:
			switch f := v.File.(type) {
			case a2a.FileURI:
				uri := f.URI
				out = append(out, Part{URL: &uri, Filename: f.Name, MediaType: f.MimeType, Metadata: v.Metadata})
			case a2a.FileBytes:
				raw, err := decodeBase64(f.Bytes)
				if err != nil {
					raw = []byte(f.Bytes)
				}
				b := Bytes(raw)
				out = append(out, Part{Raw: &b, Filename: f.Name, MediaType: f.MimeType, Metadata: v.Metadata})
			}
		}
	}
	return out
}

func withoutKey(m map[string]any, key string) map[string]any {
	if len(m) <= 1 {
		return nil
	}
	out := make(map[string]any, len(m)-1)
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// EventFrom wraps a 0.3 event as a 1.0 stream response.
func EventFrom(ev a2a.Event) StreamResponse {
	switch v := ev.(type) {
	case *a2a.Task:
		return StreamResponse{Task: TaskFrom(v, true)}
	case *a2a.Message:
		return StreamResponse{Message: MessageFrom(v)}
	case *a2a.TaskStatusUpdateEvent:
		return StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{
			TaskID: string(v.TaskID), ContextID: v.ContextID, Status: statusFrom(v.Status), Metadata: v.Metadata,
		}}
	case *a2a.TaskArtifactUpdateEvent:
		art := Artifact{}
		if v.Artifact != nil {
			art = ArtifactFrom(v.Artifact)
		}
		return StreamResponse{ArtifactUpdate: &TaskArtifactUpdateEvent{
			TaskID: string(v.TaskID), ContextID: v.ContextID, Artifact: art,
			Append: v.Append, LastChunk: v.LastChunk, Metadata: v.Metadata,
		}}
	}
	return StreamResponse{}
}

// ErrInvalid marks a request that does not satisfy the 1.0 data model; the
// server answers it with InvalidParams.
var ErrInvalid = errors.New("a2av1: invalid params")

// invalid is a request the conversion refuses: a *FieldError whose reason
// names the field.
func invalid(format string, args ...any) error {
	return &FieldError{Reason: fmt.Sprintf(format, args...)}
}

// MessageTo converts and validates an incoming message: a message id, a user
// or agent role, and at least one part holding exactly one kind of content.
func MessageTo(m *Message) (*a2a.Message, error) {
	if m == nil {
		return nil, invalid("message is required")
	}
	if m.MessageID == "" {
		return nil, invalid("message.messageId is required")
	}
	out := &a2a.Message{
		ID:         m.MessageID,
		ContextID:  m.ContextID,
		TaskID:     a2a.TaskID(m.TaskID),
		Metadata:   m.Metadata,
		Extensions: m.Extensions,
	}
	switch m.Role {
	case RoleUser:
		out.Role = a2a.MessageRoleUser
	case RoleAgent:
		out.Role = a2a.MessageRoleAgent
	default:
		return nil, invalid("message.role must be ROLE_USER or ROLE_AGENT")
	}
	if len(m.Parts) == 0 {
		return nil, invalid("message.parts must not be empty")
	}
	for i, p := range m.Parts {
		part, err := PartTo(p)
		if err != nil {
			return nil, fmt.Errorf("message.parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	for _, id := range m.ReferenceTaskIDs {
		out.ReferenceTasks = append(out.ReferenceTasks, a2a.TaskID(id))
	}
	return out, nil
}

// PartTo converts one part. A data value that is not an object becomes
// {"value": v} marked api.MetaWrapped.
func PartTo(p Part) (a2a.Part, error) {
	n := 0
	if p.Text != nil {
		n++
	}
	if p.Raw != nil {
		n++
	}
	if p.URL != nil {
		n++
	}
	data := bytes.TrimSpace(p.Data)
	if len(data) > 0 && !bytes.Equal(data, []byte("null")) {
		n++
	}
	if n != 1 {
		return nil, invalid("a part holds exactly one of text, raw, url or data (got %d)", n)
	}
	meta := a2a.FileMeta{MimeType: p.MediaType, Name: p.Filename}
	switch {
	case p.Text != nil:
		return a2a.TextPart{Text: *p.Text, Metadata: p.Metadata}, nil
	case p.Raw != nil:
		return a2a.FilePart{File: a2a.FileBytes{FileMeta: meta, Bytes: base64.StdEncoding.EncodeToString(*p.Raw)}, Metadata: p.Metadata}, nil
	case p.URL != nil:
		if *p.URL == "" {
			return nil, invalid("a url part needs a url")
		}
		return a2a.FilePart{File: a2a.FileURI{FileMeta: meta, URI: *p.URL}, Metadata: p.Metadata}, nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, invalid("data: %v", err)
	}
	if obj, ok := v.(map[string]any); ok {
		return a2a.DataPart{Data: obj, Metadata: p.Metadata}, nil
	}
	meta2 := make(map[string]any, len(p.Metadata)+1)
	for k, x := range p.Metadata {
		meta2[k] = x
	}
	meta2[api.MetaWrapped] = true
	return a2a.DataPart{Data: map[string]any{"value": v}, Metadata: meta2}, nil
}

// PushConfigTo converts a webhook registration.
func PushConfigTo(c *TaskPushNotificationConfig) (a2a.PushConfig, error) {
	if c == nil || c.URL == "" {
		return a2a.PushConfig{}, invalid("a push notification config needs a url")
	}
	out := a2a.PushConfig{ID: c.ID, URL: c.URL, Token: c.Token}
	if c.Authentication != nil {
		if c.Authentication.Scheme == "" {
			return a2a.PushConfig{}, invalid("authentication.scheme is required")
		}
		out.Auth = &a2a.PushAuthInfo{Schemes: []string{c.Authentication.Scheme}, Credentials: c.Authentication.Credentials}
	}
	return out, nil
}

// PushConfigFrom converts a stored webhook registration.
func PushConfigFrom(taskID a2a.TaskID, c a2a.PushConfig) TaskPushNotificationConfig {
	out := TaskPushNotificationConfig{ID: c.ID, TaskID: string(taskID), URL: c.URL, Token: c.Token}
	if c.Auth != nil && len(c.Auth.Schemes) > 0 {
		out.Authentication = &AuthenticationInfo{Scheme: c.Auth.Schemes[0], Credentials: c.Auth.Credentials}
	}
	return out
}

// SendParamsTo converts SendMessage params. returnImmediately false (the
// default) is a blocking send.
func SendParamsTo(r *SendMessageRequest) (*a2a.MessageSendParams, error) {
	if r == nil {
		return nil, invalid("params are required")
	}
	msg, err := MessageTo(r.Message)
	if err != nil {
		return nil, err
	}
	out := &a2a.MessageSendParams{Message: msg, Metadata: r.Metadata}
	blocking := true
	out.Config = &a2a.MessageSendConfig{Blocking: &blocking}
	if c := r.Configuration; c != nil {
		blocking = !c.ReturnImmediately
		out.Config.AcceptedOutputModes = c.AcceptedOutputModes
		if c.HistoryLength != nil {
			if *c.HistoryLength < 0 {
				return nil, invalid("configuration.historyLength must not be negative")
			}
			h := *c.HistoryLength
			out.Config.HistoryLength = &h
		}
		if c.TaskPushNotificationConfig != nil {
			pc, err := PushConfigTo(c.TaskPushNotificationConfig)
			if err != nil {
				return nil, err
			}
			out.Config.PushConfig = &pc
		}
	}
	return out, nil
}
