package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2av1"
	"github.com/agentd/agentd/tasks"
)

// taskLister is the optional handler method behind A2A 1.0 ListTasks; the
// engine implements it.
type taskLister interface {
	ListTasks(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error)
}

// asV1 reshapes an error for an A2A 1.0 client: the data is an array holding a
// google.rpc.ErrorInfo (reason, domain, the detail in its metadata).
func asV1(e *RPCError) *RPCError {
	if _, ok := e.Data.([]any); ok {
		return e
	}
	return &RPCError{Code: e.Code, Message: e.Message, Data: a2av1.ErrorData(e.Code, e.detail())}
}

func toV1Error(err error) *RPCError {
	if errors.Is(err, a2av1.ErrInvalid) {
		return asV1(invalidParams(err))
	}
	return asV1(toRPCError(err))
}

// serveV1 answers an A2A 1.0 method through the same RequestHandler (and so
// the same tasks) as the 0.3 methods, translating the proto3-JSON shapes.
func (rh *rpcHandler) serveV1(w http.ResponseWriter, r *http.Request, id json.RawMessage, method string, params json.RawMessage) {
	ctx := tasks.WithVersion(r.Context(), a2av1.Version)
	w.Header().Set(VersionHeader, a2av1.Version)
	switch method {
	case a2av1.MethodSendStreamingMessage, a2av1.MethodSubscribeToTask:
		events := rh.v1Events(ctx, method, params)
		rh.writeSSE(w, r.WithContext(ctx), id, events, func(ev a2a.Event) any { return a2av1.EventFrom(ev) }, toV1Error)
		return
	}
	res, err := rh.callV1(ctx, method, params)
	if err != nil {
		writeRPC(w, id, nil, toV1Error(err))
		return
	}
	writeRPC(w, id, res, nil)
}

// v1Events starts a 1.0 stream: SendStreamingMessage, or SubscribeToTask,
// which refuses a task that has already ended.
func (rh *rpcHandler) v1Events(ctx context.Context, method string, params json.RawMessage) iter.Seq2[a2a.Event, error] {
	if method == a2av1.MethodSendStreamingMessage {
		p, err := decodeSend(params)
		if err != nil {
			return failed(err)
		}
		return rh.h.OnSendMessageStream(ctx, p)
	}
	var p a2av1.SubscribeToTaskRequest
	if e := decodeParams(params, &p); e != nil {
		return failed(e)
	}
	if p.ID == "" {
		return failed(fmt.Errorf("id is required: %w", a2a.ErrInvalidParams))
	}
	t, err := rh.h.OnGetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(p.ID)})
	if err != nil {
		return failed(err)
	}
	if t.Status.State.Terminal() {
		return failed(fmt.Errorf("task %s is %s; subscribe to a task that is still running: %w", t.ID, t.Status.State, a2a.ErrUnsupportedOperation))
	}
	return rh.h.OnResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(p.ID)})
}

func decodeSend(params json.RawMessage) (*a2a.MessageSendParams, error) {
	var req a2av1.SendMessageRequest
	if e := decodeParams(params, &req); e != nil {
		return nil, e
	}
	p, err := a2av1.SendParamsTo(&req)
	if err != nil {
		return nil, err
	}
	if err := tasks.ValidateSendParams(p); err != nil {
		return nil, err
	}
	return p, nil
}

// callV1 dispatches one non-streaming 1.0 method.
func (rh *rpcHandler) callV1(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case a2av1.MethodSendMessage:
		p, err := decodeSend(params)
		if err != nil {
			return nil, err
		}
		res, err := rh.h.OnSendMessage(ctx, p)
		if err != nil {
			return nil, err
		}
		switch v := res.(type) {
		case *a2a.Task:
			return a2av1.SendMessageResponse{Task: a2av1.TaskFrom(v, true)}, nil
		case *a2a.Message:
			return a2av1.SendMessageResponse{Message: a2av1.MessageFrom(v)}, nil
		}
		return nil, fmt.Errorf("unexpected send result %T: %w", res, a2a.ErrInternalError)
	case a2av1.MethodGetTask:
		var p a2av1.GetTaskRequest
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if p.ID == "" {
			return nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
		}
		t, err := rh.h.OnGetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(p.ID), HistoryLength: p.HistoryLength})
		if err != nil {
			return nil, err
		}
		return a2av1.TaskFrom(t, true), nil
	case a2av1.MethodListTasks:
		return rh.listTasks(ctx, params)
	case a2av1.MethodCancelTask:
		var p a2av1.CancelTaskRequest
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if p.ID == "" {
			return nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
		}
		t, err := rh.h.OnCancelTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(p.ID), Metadata: p.Metadata})
		if err != nil {
			return nil, err
		}
		return a2av1.TaskFrom(t, true), nil
	case a2av1.MethodCreatePushConfig:
		var p a2av1.TaskPushNotificationConfig
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if p.TaskID == "" {
			return nil, fmt.Errorf("taskId is required: %w", a2a.ErrInvalidParams)
		}
		cfg, err := a2av1.PushConfigTo(&p)
		if err != nil {
			return nil, err
		}
		got, err := rh.h.OnSetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: a2a.TaskID(p.TaskID), Config: cfg})
		if err != nil {
			return nil, err
		}
		return a2av1.PushConfigFrom(got.TaskID, got.Config), nil
	case a2av1.MethodGetPushConfig:
		var p a2av1.GetTaskPushNotificationConfigRequest
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if p.TaskID == "" || p.ID == "" {
			return nil, fmt.Errorf("taskId and id are required: %w", a2a.ErrInvalidParams)
		}
		got, err := rh.h.OnGetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: a2a.TaskID(p.TaskID), ConfigID: p.ID})
		if err != nil {
			return nil, err
		}
		return a2av1.PushConfigFrom(got.TaskID, got.Config), nil
	case a2av1.MethodListPushConfigs:
		var p a2av1.ListTaskPushNotificationConfigsRequest
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if p.TaskID == "" {
			return nil, fmt.Errorf("taskId is required: %w", a2a.ErrInvalidParams)
		}
		list, err := rh.h.OnListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: a2a.TaskID(p.TaskID)})
		if err != nil {
			return nil, err
		}
		out := a2av1.ListTaskPushNotificationConfigsResponse{Configs: []a2av1.TaskPushNotificationConfig{}}
		for _, c := range list {
			out.Configs = append(out.Configs, a2av1.PushConfigFrom(c.TaskID, c.Config))
		}
		return out, nil
	case a2av1.MethodDeletePushConfig:
		var p a2av1.GetTaskPushNotificationConfigRequest
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if p.TaskID == "" || p.ID == "" {
			return nil, fmt.Errorf("taskId and id are required: %w", a2a.ErrInvalidParams)
		}
		if err := rh.h.OnDeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: a2a.TaskID(p.TaskID), ConfigID: p.ID}); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	case a2av1.MethodGetExtendedAgentCard:
		// The card does not declare capabilities.extendedAgentCard.
		return nil, fmt.Errorf("this agent has no extended agent card: %w", a2a.ErrUnsupportedOperation)
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + method}
}

// listTasks serves ListTasks: the caller's tasks, newest status first, a page
// at a time.
func (rh *rpcHandler) listTasks(ctx context.Context, params json.RawMessage) (any, error) {
	lister, ok := rh.h.(taskLister)
	if !ok {
		return nil, fmt.Errorf("ListTasks: %w", a2a.ErrUnsupportedOperation)
	}
	var p a2av1.ListTasksRequest
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if e := decodeParams(params, &p); e != nil {
		return nil, e
	}
	q := tasks.ListQuery{ContextID: p.ContextID, PageToken: p.PageToken, HistoryLength: p.HistoryLength}
	if p.Status != "" && p.Status != a2av1.StateUnspecified {
		q.State = a2av1.StateTo(p.Status)
	}
	if p.PageSize != nil {
		if *p.PageSize <= 0 {
			return nil, fmt.Errorf("pageSize must be positive: %w", a2a.ErrInvalidParams)
		}
		q.PageSize = *p.PageSize
	}
	after, err := a2av1.ParseTimestamp(p.StatusTimestampAfter)
	if err != nil {
		return nil, fmt.Errorf("statusTimestampAfter: %w: %w", err, a2a.ErrInvalidParams)
	}
	q.UpdatedAfter = after
	page, err := lister.ListTasks(ctx, q)
	if err != nil {
		return nil, err
	}
	withArtifacts := p.IncludeArtifacts != nil && *p.IncludeArtifacts
	out := a2av1.ListTasksResponse{Tasks: make([]a2av1.Task, 0, len(page.Tasks)), NextPageToken: page.NextPageToken, PageSize: page.PageSize, TotalSize: page.TotalSize}
	for _, t := range page.Tasks {
		out.Tasks = append(out.Tasks, *a2av1.TaskFrom(t, withArtifacts))
	}
	return out, nil
}
