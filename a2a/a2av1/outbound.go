package a2av1

import (
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
)

// The conversions of a client calling a 1.0 agent: a2a-go's request types to
// the 1.0 wire shapes, and the agent's 1.0 answers back to a2a-go's types.

// SendParamsFrom converts outgoing send params. A send that does not say
// whether it blocks blocks (returnImmediately false), as in both versions.
func SendParamsFrom(p *a2a.MessageSendParams) *SendMessageRequest {
	out := &SendMessageRequest{Metadata: p.Metadata}
	if p.Message != nil {
		out.Message = MessageFrom(p.Message)
	}
	if c := p.Config; c != nil {
		cfg := &SendMessageConfiguration{
			AcceptedOutputModes: c.AcceptedOutputModes,
			ReturnImmediately:   c.Blocking != nil && !*c.Blocking,
		}
		if c.HistoryLength != nil {
			h := *c.HistoryLength
			cfg.HistoryLength = &h
		}
		if c.PushConfig != nil {
			pc := PushConfigFrom("", *c.PushConfig)
			cfg.TaskPushNotificationConfig = &pc
		}
		out.Configuration = cfg
	}
	return out
}

// TaskTo converts a task an agent answered. Its messages are checked as
// MessageTo checks a request's.
func TaskTo(t *Task) (*a2a.Task, error) {
	if t == nil {
		return nil, invalid("task is required")
	}
	if t.ID == "" {
		return nil, invalid("task.id is required")
	}
	status, err := statusTo(t.Status)
	if err != nil {
		return nil, fmt.Errorf("task.status: %w", err)
	}
	out := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: status, Metadata: t.Metadata}
	for i := range t.Artifacts {
		a, err := ArtifactTo(&t.Artifacts[i])
		if err != nil {
			return nil, fmt.Errorf("task.artifacts[%d]: %w", i, err)
		}
		out.Artifacts = append(out.Artifacts, a)
	}
	for i := range t.History {
		m, err := MessageTo(&t.History[i])
		if err != nil {
			return nil, fmt.Errorf("task.history[%d]: %w", i, err)
		}
		out.History = append(out.History, m)
	}
	return out, nil
}

func statusTo(s TaskStatus) (a2a.TaskStatus, error) {
	out := a2a.TaskStatus{State: StateTo(s.State)}
	if s.Timestamp != "" {
		ts, err := ParseTimestamp(s.Timestamp)
		if err != nil {
			return a2a.TaskStatus{}, invalid("timestamp: %v", err)
		}
		out.Timestamp = &ts
	}
	if s.Message != nil {
		m, err := MessageTo(s.Message)
		if err != nil {
			return a2a.TaskStatus{}, fmt.Errorf("message: %w", err)
		}
		out.Message = m
	}
	return out, nil
}

// ArtifactTo converts an artifact an agent answered.
func ArtifactTo(a *Artifact) (*a2a.Artifact, error) {
	out := &a2a.Artifact{
		ID:          a2a.ArtifactID(a.ArtifactID),
		Name:        a.Name,
		Description: a.Description,
		Metadata:    a.Metadata,
		Extensions:  a.Extensions,
	}
	for i, p := range a.Parts {
		part, err := PartTo(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	return out, nil
}

// EventTo converts one event of a stream an agent answered; exactly one of
// its fields must be set.
func EventTo(r *StreamResponse) (a2a.Event, error) {
	n := 0
	for _, set := range []bool{r.Task != nil, r.Message != nil, r.StatusUpdate != nil, r.ArtifactUpdate != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, invalid("a stream response holds exactly one of task, message, statusUpdate or artifactUpdate (got %d)", n)
	}
	switch {
	case r.Task != nil:
		return TaskTo(r.Task)
	case r.Message != nil:
		return MessageTo(r.Message)
	case r.StatusUpdate != nil:
		u := r.StatusUpdate
		status, err := statusTo(u.Status)
		if err != nil {
			return nil, fmt.Errorf("statusUpdate.status: %w", err)
		}
		return &a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Status: status,
			Final:    status.State.Terminal() || status.State == a2a.TaskStateInputRequired || status.State == a2a.TaskStateAuthRequired,
			Metadata: u.Metadata}, nil
	}
	u := r.ArtifactUpdate
	a, err := ArtifactTo(&u.Artifact)
	if err != nil {
		return nil, fmt.Errorf("artifactUpdate.artifact: %w", err)
	}
	return &a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Artifact: a,
		Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata}, nil
}

// SendResultTo converts SendMessage's answer: the task or the message.
func SendResultTo(r *SendMessageResponse) (a2a.SendMessageResult, error) {
	switch {
	case r.Task != nil && r.Message == nil:
		return TaskTo(r.Task)
	case r.Message != nil && r.Task == nil:
		return MessageTo(r.Message)
	}
	return nil, invalid("a send message response holds exactly one of task or message")
}
