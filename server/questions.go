package server

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// a2a.Questions and a2a.Answer: the questions and approvals tasks wait on,
// listed from the engine's waiting state, and an operator's answer on the
// caller's behalf (tasks.Engine.AnswerAs: the caller's answer's path, the
// operator named in the answer's metadata). Both are audited (recorded).

// errNoTasks answers a2a.Questions and a2a.Answer on an Operator without an
// engine.
var errNoTasks = &RPCError{Code: CodeUnsupportedOp, Message: "this service runs no tasks: no question can wait"}

// questions serves a2a.Questions.
func (o *Operator) questions(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.QuestionsParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	if o.Tasks == nil {
		return nil, errNoTasks
	}
	qs := o.Questions(p.TaskID)
	// With replicas on one store, the questions of the tasks the others
	// run too: an answer to one is forwarded to its runner (AnswerAs).
	more, err := o.Tasks.QuestionsElsewhere(ctx, a2a.TaskID(p.TaskID))
	if err != nil {
		return nil, err
	}
	if len(more) > 0 {
		if o.InputTimeout > 0 {
			for i := range more {
				d := more[i].Since.Add(o.InputTimeout)
				more[i].Deadline = &d
			}
		}
		qs = append(qs, more...)
		sort.SliceStable(qs, func(i, j int) bool { return qs[i].Since.Before(qs[j].Since) })
	}
	return api.QuestionsResult{Questions: qs}, nil
}

// Questions returns the questions tasks wait on, as a2a.Questions lists
// them (task set: that task's only): the engine's, with each asker's handle
// (the live node at its agent path in the task's tree) and, under an input
// timeout, the deadline. None without an engine.
func (o *Operator) Questions(task string) []api.PendingQuestion {
	if o.Tasks == nil {
		return []api.PendingQuestion{}
	}
	qs := o.Tasks.Questions(a2a.TaskID(task))
	if len(qs) > 0 && o.Sup != nil {
		handles := map[[2]string]string{}
		for _, n := range o.Sup.Live() {
			handles[[2]string{n.RootHandle, n.AgentPath}] = n.Handle
		}
		for i := range qs {
			qs[i].Handle = handles[[2]string{qs[i].TaskID, qs[i].AgentPath}]
		}
	}
	if o.InputTimeout > 0 {
		for i := range qs {
			d := qs[i].Since.Add(o.InputTimeout)
			qs[i].Deadline = &d
		}
	}
	return qs
}

// answer serves a2a.Answer.
func (o *Operator) answer(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.AnswerParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	if p.TaskID == "" {
		return nil, invalidParams(errors.New("task_id is required: a waiting task's id, as a2a.Questions lists them"))
	}
	if o.Tasks == nil {
		return nil, errNoTasks
	}
	id, _ := IdentityFrom(ctx)
	by := auditCaller(id)
	t, err := o.Tasks.AnswerAs(ctx, a2a.TaskID(p.TaskID), p.Answer, by)
	if err != nil {
		return nil, err
	}
	return api.AnswerResult{TaskID: string(t.ID), State: string(t.Status.State), AnsweredBy: by}, nil
}
