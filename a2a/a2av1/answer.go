package a2av1

// The client's side of the 1.0 wire format: a request built from a2a-go's
// types (SendParamsFrom, ...) and an agent's answer read back into them
// (DecodeTask, DecodeEvent, ...). An answer is read leniently, as the
// specification asks of a receiver (unknown fields are ignored); what agentd
// needs of it (a task id, a known state, parts holding one kind of content
// each) is still checked.

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
)

// SendParamsFrom converts SendMessage params for a 1.0 agent: a send that is
// not blocking (configuration.blocking false) asks the agent to return
// immediately.
func SendParamsFrom(p *a2a.MessageSendParams) *SendMessageRequest {
	out := &SendMessageRequest{Message: MessageFrom(p.Message), Metadata: p.Metadata}
	if c := p.Config; c != nil {
		cfg := &SendMessageConfiguration{AcceptedOutputModes: c.AcceptedOutputModes, HistoryLength: c.HistoryLength}
		cfg.ReturnImmediately = c.Blocking != nil && !*c.Blocking
		if c.PushConfig != nil {
			pc := PushConfigFrom("", *c.PushConfig)
			cfg.TaskPushNotificationConfig = &pc
		}
		out.Configuration = cfg
	}
	return out
}

// answerPart is Part read leniently.
type answerPart Part

type answerMessage struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId"`
	TaskID           string         `json:"taskId"`
	Role             Role           `json:"role"`
	Parts            []answerPart   `json:"parts"`
	Metadata         map[string]any `json:"metadata"`
	Extensions       []string       `json:"extensions"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds"`
}

type answerStatus struct {
	State     TaskState      `json:"state"`
	Message   *answerMessage `json:"message"`
	Timestamp string         `json:"timestamp"`
}

type answerArtifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parts       []answerPart   `json:"parts"`
	Metadata    map[string]any `json:"metadata"`
	Extensions  []string       `json:"extensions"`
}

type answerTask struct {
	ID        string           `json:"id"`
	ContextID string           `json:"contextId"`
	Status    answerStatus     `json:"status"`
	Artifacts []answerArtifact `json:"artifacts"`
	History   []answerMessage  `json:"history"`
	Metadata  map[string]any   `json:"metadata"`
}

type answerStream struct {
	Task         *answerTask    `json:"task"`
	Message      *answerMessage `json:"message"`
	StatusUpdate *struct {
		TaskID    string         `json:"taskId"`
		ContextID string         `json:"contextId"`
		Status    answerStatus   `json:"status"`
		Metadata  map[string]any `json:"metadata"`
	} `json:"statusUpdate"`
	ArtifactUpdate *struct {
		TaskID    string         `json:"taskId"`
		ContextID string         `json:"contextId"`
		Artifact  answerArtifact `json:"artifact"`
		Append    bool           `json:"append"`
		LastChunk bool           `json:"lastChunk"`
		Metadata  map[string]any `json:"metadata"`
	} `json:"artifactUpdate"`
}

type answerPushConfig struct {
	ID             string `json:"id"`
	TaskID         string `json:"taskId"`
	URL            string `json:"url"`
	Token          string `json:"token"`
	Authentication *struct {
		Scheme      string `json:"scheme"`
		Credentials string `json:"credentials"`
	} `json:"authentication"`
}

func (m *answerMessage) to() (*a2a.Message, error) {
	msg := &Message{
		MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: m.Role,
		Metadata: m.Metadata, Extensions: m.Extensions, ReferenceTaskIDs: m.ReferenceTaskIDs,
	}
	for _, p := range m.Parts {
		msg.Parts = append(msg.Parts, Part(p))
	}
	return MessageTo(msg)
}

func partsTo(parts []answerPart) (a2a.ContentParts, error) {
	out := make(a2a.ContentParts, 0, len(parts))
	for i, p := range parts {
		part, err := PartTo(Part(p))
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out = append(out, part)
	}
	return out, nil
}

func (a *answerArtifact) to() (*a2a.Artifact, error) {
	parts, err := partsTo(a.Parts)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
	}
	return &a2a.Artifact{ID: a2a.ArtifactID(a.ArtifactID), Name: a.Name, Description: a.Description,
		Parts: parts, Metadata: a.Metadata, Extensions: a.Extensions}, nil
}

func (s *answerStatus) to() (a2a.TaskStatus, error) {
	st := StateTo(s.State)
	if st == a2a.TaskStateUnspecified {
		return a2a.TaskStatus{}, fmt.Errorf("status: state %q is not a task state", s.State)
	}
	out := a2a.TaskStatus{State: st}
	if s.Timestamp != "" {
		ts, err := ParseTimestamp(s.Timestamp)
		if err != nil {
			return a2a.TaskStatus{}, fmt.Errorf("status: %w", err)
		}
		out.Timestamp = &ts
	}
	if s.Message != nil {
		m, err := s.Message.to()
		if err != nil {
			return a2a.TaskStatus{}, fmt.Errorf("status.message: %w", err)
		}
		out.Message = m
	}
	return out, nil
}

func (t *answerTask) to() (*a2a.Task, error) {
	if t.ID == "" {
		return nil, fmt.Errorf("a task without an id")
	}
	status, err := t.Status.to()
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	out := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: status, Metadata: t.Metadata}
	for i := range t.Artifacts {
		a, err := t.Artifacts[i].to()
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.ID, err)
		}
		out.Artifacts = append(out.Artifacts, a)
	}
	for i := range t.History {
		m, err := t.History[i].to()
		if err != nil {
			return nil, fmt.Errorf("task %s: history[%d]: %w", t.ID, i, err)
		}
		out.History = append(out.History, m)
	}
	return out, nil
}

// DecodeTask reads a Task answer (GetTask, CancelTask).
func DecodeTask(raw []byte) (*a2a.Task, error) {
	var t answerTask
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("a2av1: a task: %w", err)
	}
	out, err := t.to()
	if err != nil {
		return nil, fmt.Errorf("a2av1: %w", err)
	}
	return out, nil
}

// DecodeSendResult reads a SendMessage answer: {"task": ...} or
// {"message": ...}.
func DecodeSendResult(raw []byte) (a2a.SendMessageResult, error) {
	ev, err := DecodeEvent(raw)
	if err != nil {
		return nil, err
	}
	switch v := ev.(type) {
	case *a2a.Task:
		return v, nil
	case *a2a.Message:
		return v, nil
	}
	return nil, fmt.Errorf("a2av1: the answer is a %T, not a task or a message", ev)
}

// DecodeEvent reads a StreamResponse: exactly one of task, message,
// statusUpdate and artifactUpdate.
func DecodeEvent(raw []byte) (a2a.Event, error) {
	var s answerStream
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("a2av1: an event: %w", err)
	}
	n := 0
	for _, set := range []bool{s.Task != nil, s.Message != nil, s.StatusUpdate != nil, s.ArtifactUpdate != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("a2av1: an event holds exactly one of task, message, statusUpdate or artifactUpdate (got %d)", n)
	}
	var (
		ev  a2a.Event
		err error
	)
	switch {
	case s.Task != nil:
		ev, err = s.Task.to()
	case s.Message != nil:
		ev, err = s.Message.to()
	case s.StatusUpdate != nil:
		u := s.StatusUpdate
		var st a2a.TaskStatus
		if st, err = u.Status.to(); err == nil {
			ev = &a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Status: st,
				Final: st.State.Terminal(), Metadata: u.Metadata}
		}
	default:
		u := s.ArtifactUpdate
		var art *a2a.Artifact
		if art, err = u.Artifact.to(); err == nil {
			ev = &a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Artifact: art,
				Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("a2av1: an event: %w", err)
	}
	return ev, nil
}

func (c *answerPushConfig) to() *a2a.TaskPushConfig {
	out := &a2a.TaskPushConfig{TaskID: a2a.TaskID(c.TaskID), Config: a2a.PushConfig{ID: c.ID, URL: c.URL, Token: c.Token}}
	if c.Authentication != nil && c.Authentication.Scheme != "" {
		out.Config.Auth = &a2a.PushAuthInfo{Schemes: []string{c.Authentication.Scheme}, Credentials: c.Authentication.Credentials}
	}
	return out
}

// DecodePushConfig reads a TaskPushNotificationConfig answer.
func DecodePushConfig(raw []byte) (*a2a.TaskPushConfig, error) {
	var c answerPushConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("a2av1: a push notification config: %w", err)
	}
	return c.to(), nil
}

// DecodePushConfigList reads a ListTaskPushNotificationConfigs answer (its
// first page: agentd asks for no other).
func DecodePushConfigList(raw []byte) ([]*a2a.TaskPushConfig, error) {
	var l struct {
		Configs []answerPushConfig `json:"configs"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("a2av1: a push notification config list: %w", err)
	}
	out := make([]*a2a.TaskPushConfig, 0, len(l.Configs))
	for i := range l.Configs {
		out = append(out, l.Configs[i].to())
	}
	return out, nil
}
