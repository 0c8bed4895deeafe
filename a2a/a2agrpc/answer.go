package a2agrpc

import (
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/a2av1"
)

// The client's answers, 1.0 to a2a-go's 0.3 types. They are read leniently:
// what a request must carry (a message id, a role) an answer may lack, and
// it is taken as it is; a part is read as a2av1.PartTo reads a request's.

func answerTask(method string, t *a2apb.Task) (*a2a.Task, error) {
	v1, err := Task(t)
	if err == nil {
		var out *a2a.Task
		if out, err = task03(v1); err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("a2agrpc: %s: the answer: %w: %w", method, err, ErrBadAnswer)
}

func task03(t *a2av1.Task) (*a2a.Task, error) {
	st, err := status03(t.Status)
	if err != nil {
		return nil, err
	}
	out := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.ContextID, Status: st, Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		v, err := artifact03(a)
		if err != nil {
			return nil, err
		}
		out.Artifacts = append(out.Artifacts, v)
	}
	for i := range t.History {
		m, err := message03(&t.History[i])
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, m)
	}
	return out, nil
}

func status03(s a2av1.TaskStatus) (a2a.TaskStatus, error) {
	out := a2a.TaskStatus{State: a2av1.StateTo(s.State)}
	if s.Timestamp != "" {
		ts, err := a2av1.ParseTimestamp(s.Timestamp)
		if err != nil {
			return a2a.TaskStatus{}, err
		}
		out.Timestamp = &ts
	}
	if s.Message != nil {
		m, err := message03(s.Message)
		if err != nil {
			return a2a.TaskStatus{}, err
		}
		out.Message = m
	}
	return out, nil
}

func message03(m *a2av1.Message) (*a2a.Message, error) {
	out := &a2a.Message{ID: m.MessageID, ContextID: m.ContextID, TaskID: a2a.TaskID(m.TaskID), Metadata: m.Metadata, Extensions: m.Extensions, Role: a2a.MessageRoleAgent}
	if m.Role == a2av1.RoleUser {
		out.Role = a2a.MessageRoleUser
	}
	for i, p := range m.Parts {
		part, err := a2av1.PartTo(p)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	for _, id := range m.ReferenceTaskIDs {
		out.ReferenceTasks = append(out.ReferenceTasks, a2a.TaskID(id))
	}
	return out, nil
}

func artifact03(a a2av1.Artifact) (*a2a.Artifact, error) {
	out := &a2a.Artifact{ID: a2a.ArtifactID(a.ArtifactID), Name: a.Name, Description: a.Description, Metadata: a.Metadata, Extensions: a.Extensions}
	for i, p := range a.Parts {
		part, err := a2av1.PartTo(p)
		if err != nil {
			return nil, fmt.Errorf("artifact parts[%d]: %w", i, err)
		}
		out.Parts = append(out.Parts, part)
	}
	return out, nil
}

// event03 is one stream event in 0.3's types. A status update is final when
// its state ends the stream: a terminal state, or one that waits for the
// caller (input or auth required); 1.0 has no final flag.
func event03(ev a2av1.StreamResponse) (a2a.Event, error) {
	switch {
	case ev.Task != nil:
		return task03(ev.Task)
	case ev.Message != nil:
		return message03(ev.Message)
	case ev.StatusUpdate != nil:
		u := ev.StatusUpdate
		st, err := status03(u.Status)
		if err != nil {
			return nil, err
		}
		final := st.State.Terminal() || st.State == a2a.TaskStateInputRequired || st.State == a2a.TaskStateAuthRequired
		return &a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Status: st, Final: final, Metadata: u.Metadata}, nil
	case ev.ArtifactUpdate != nil:
		u := ev.ArtifactUpdate
		a, err := artifact03(u.Artifact)
		if err != nil {
			return nil, err
		}
		return &a2a.TaskArtifactUpdateEvent{TaskID: a2a.TaskID(u.TaskID), ContextID: u.ContextID, Artifact: a, Append: u.Append, LastChunk: u.LastChunk, Metadata: u.Metadata}, nil
	}
	return nil, fmt.Errorf("an empty event")
}

func pushConfig03(method string, c *a2apb.TaskPushNotificationConfig) (*a2a.TaskPushConfig, error) {
	v1 := PushConfig(c)
	cfg, err := a2av1.PushConfigTo(v1)
	if err != nil {
		return nil, fmt.Errorf("a2agrpc: %s: the answer: %w: %w", method, err, ErrBadAnswer)
	}
	return &a2a.TaskPushConfig{TaskID: a2a.TaskID(v1.TaskID), Config: cfg}, nil
}
