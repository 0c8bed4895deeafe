package server

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
)

// methods10 are the A2A 1.0 methods, served through the same RequestHandler
// (and so the same tasks) as the 0.3 methods: each entry's prepare checks
// what the 1.0 request requires and converts its proto3-JSON shape (through
// a2av1) into the handler's argument, and its serve converts the answer back.
var methods10 = map[string]rpcMethod{
	a2av1.MethodSendMessage:          unary(a2av1.Version, paramsObject, a2av1.SendParamsTo, sendMessage),
	a2av1.MethodSendStreamingMessage: streaming(a2av1.Version, a2av1.SendParamsTo, a2asrv.RequestHandler.OnSendMessageStream),
	a2av1.MethodGetTask:              unary(a2av1.Version, paramsObject, getTaskParams, getTask),
	a2av1.MethodListTasks:            unary(a2av1.Version, paramsOptional, listQuery, listTasks),
	a2av1.MethodCancelTask:           unary(a2av1.Version, paramsObject, cancelParams, cancelTask),
	a2av1.MethodSubscribeToTask:      streaming(a2av1.Version, subscribeParams, subscribe),
	a2av1.MethodCreatePushConfig:     unary(a2av1.Version, paramsObject, createPushParams, createPushConfig),
	a2av1.MethodGetPushConfig:        unary(a2av1.Version, paramsObject, getPushParams, getPushConfig),
	a2av1.MethodListPushConfigs:      unary(a2av1.Version, paramsObject, listPushParams, listPushConfigs),
	a2av1.MethodDeletePushConfig:     unary(a2av1.Version, paramsObject, deletePushParams, deletePushConfig),
	a2av1.MethodGetExtendedAgentCard: unary(a2av1.Version, paramsOptional, asIs[a2av1.GetExtendedAgentCardRequest], extendedCard),
}

// asV1 reshapes an error for an A2A 1.0 client: the data is an array holding a
// google.rpc.ErrorInfo (reason, domain, the detail in its metadata).
func asV1(e *RPCError) *RPCError {
	if _, ok := e.Data.([]any); ok {
		return e
	}
	if e.retryAfter > 0 {
		return shedErrorV1(e)
	}
	return &RPCError{Code: e.Code, Message: e.Message, Data: a2av1.ErrorData(e.Code, e.detail())}
}

// toV1Error is toRPCError in the 1.0 shape; a request that breaks the 1.0
// data model (a2av1.ErrInvalid) is invalid params.
func toV1Error(err error) *RPCError {
	if errors.Is(err, a2av1.ErrInvalid) {
		return asV1(toRPCError(invalidParams(err)))
	}
	return asV1(toRPCError(err))
}

// errRequired is the refusal of a request without a field 1.0 requires; msg
// says which.
func errRequired(msg string) error {
	return fmt.Errorf("%s: %w", msg, a2a.ErrInvalidParams)
}

func sendMessage(h a2asrv.RequestHandler, ctx context.Context, p *a2a.MessageSendParams) (any, error) {
	res, err := h.OnSendMessage(ctx, p)
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
}

func getTaskParams(p *a2av1.GetTaskRequest) (*a2a.TaskQueryParams, error) {
	if p.ID == "" {
		return nil, errRequired("id is required")
	}
	return &a2a.TaskQueryParams{ID: a2a.TaskID(p.ID), HistoryLength: p.HistoryLength}, nil
}

func getTask(h a2asrv.RequestHandler, ctx context.Context, q *a2a.TaskQueryParams) (*a2av1.Task, error) {
	return taskV1(h.OnGetTask(ctx, q))
}

// taskV1 is a handler's task answer in the 1.0 shape, artifacts included.
func taskV1(t *a2a.Task, err error) (*a2av1.Task, error) {
	if err != nil {
		return nil, err
	}
	return a2av1.TaskFrom(t, true), nil
}

func cancelParams(p *a2av1.CancelTaskRequest) (*a2a.TaskIDParams, error) {
	if p.ID == "" {
		return nil, errRequired("id is required")
	}
	return &a2a.TaskIDParams{ID: a2a.TaskID(p.ID), Metadata: p.Metadata}, nil
}

func cancelTask(h a2asrv.RequestHandler, ctx context.Context, p *a2a.TaskIDParams) (*a2av1.Task, error) {
	return taskV1(h.OnCancelTask(ctx, p))
}

func subscribeParams(p *a2av1.SubscribeToTaskRequest) (*a2a.TaskIDParams, error) {
	if p.ID == "" {
		return nil, errRequired("id is required")
	}
	return &a2a.TaskIDParams{ID: a2a.TaskID(p.ID)}, nil
}

// subscribe is SubscribeToTask, which refuses a task that has already ended.
func subscribe(h a2asrv.RequestHandler, ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	t, err := h.OnGetTask(ctx, &a2a.TaskQueryParams{ID: p.ID})
	if err != nil {
		return failed(err)
	}
	if t.Status.State.Terminal() {
		return failed(fmt.Errorf("task %s is %s; subscribe to a task that is still running: %w", t.ID, t.Status.State, a2a.ErrUnsupportedOperation))
	}
	return h.OnResubscribeToTask(ctx, p)
}

func createPushParams(p *a2av1.TaskPushNotificationConfig) (*a2a.TaskPushConfig, error) {
	if p.TaskID == "" {
		return nil, errRequired("taskId is required")
	}
	cfg, err := a2av1.PushConfigTo(p)
	if err != nil {
		return nil, err
	}
	return &a2a.TaskPushConfig{TaskID: a2a.TaskID(p.TaskID), Config: cfg}, nil
}

func createPushConfig(h a2asrv.RequestHandler, ctx context.Context, p *a2a.TaskPushConfig) (a2av1.TaskPushNotificationConfig, error) {
	return pushConfigV1(h.OnSetTaskPushConfig(ctx, p))
}

// pushConfigV1 is a handler's push config answer in the 1.0 shape.
func pushConfigV1(got *a2a.TaskPushConfig, err error) (a2av1.TaskPushNotificationConfig, error) {
	if err != nil {
		return a2av1.TaskPushNotificationConfig{}, err
	}
	return a2av1.PushConfigFrom(got.TaskID, got.Config), nil
}

func getPushParams(p *a2av1.GetTaskPushNotificationConfigRequest) (*a2a.GetTaskPushConfigParams, error) {
	if p.TaskID == "" || p.ID == "" {
		return nil, errRequired("taskId and id are required")
	}
	return &a2a.GetTaskPushConfigParams{TaskID: a2a.TaskID(p.TaskID), ConfigID: p.ID}, nil
}

func getPushConfig(h a2asrv.RequestHandler, ctx context.Context, p *a2a.GetTaskPushConfigParams) (a2av1.TaskPushNotificationConfig, error) {
	return pushConfigV1(h.OnGetTaskPushConfig(ctx, p))
}

func listPushParams(p *a2av1.ListTaskPushNotificationConfigsRequest) (*a2a.ListTaskPushConfigParams, error) {
	if p.TaskID == "" {
		return nil, errRequired("taskId is required")
	}
	return &a2a.ListTaskPushConfigParams{TaskID: a2a.TaskID(p.TaskID)}, nil
}

func listPushConfigs(h a2asrv.RequestHandler, ctx context.Context, p *a2a.ListTaskPushConfigParams) (a2av1.ListTaskPushNotificationConfigsResponse, error) {
	list, err := h.OnListTaskPushConfig(ctx, p)
	if err != nil {
		return a2av1.ListTaskPushNotificationConfigsResponse{}, err
	}
	out := a2av1.ListTaskPushNotificationConfigsResponse{Configs: []a2av1.TaskPushNotificationConfig{}}
	for _, c := range list {
		out.Configs = append(out.Configs, a2av1.PushConfigFrom(c.TaskID, c.Config))
	}
	return out, nil
}

// deletePushParams reads DeleteTaskPushNotificationConfig, whose params have
// the shape of GetTaskPushNotificationConfig's.
func deletePushParams(p *a2av1.GetTaskPushNotificationConfigRequest) (*a2a.DeleteTaskPushConfigParams, error) {
	q, err := getPushParams(p)
	if err != nil {
		return nil, err
	}
	return &a2a.DeleteTaskPushConfigParams{TaskID: q.TaskID, ConfigID: q.ConfigID}, nil
}

func deletePushConfig(h a2asrv.RequestHandler, ctx context.Context, p *a2a.DeleteTaskPushConfigParams) (struct{}, error) {
	return struct{}{}, h.OnDeleteTaskPushConfig(ctx, p)
}

// extendedCard refuses GetExtendedAgentCard: the card does not declare
// capabilities.extendedAgentCard.
func extendedCard(a2asrv.RequestHandler, context.Context, *a2av1.GetExtendedAgentCardRequest) (any, error) {
	return nil, fmt.Errorf("this agent has no extended agent card: %w", a2a.ErrUnsupportedOperation)
}

// taskLister is the optional handler method behind A2A 1.0 ListTasks; the
// engine implements it.
type taskLister interface {
	ListTasks(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error)
}

// listRequest is ListTasks' query with the one 1.0 option the engine does not
// take: whether artifacts are listed.
type listRequest struct {
	query         tasks.ListQuery
	withArtifacts bool
}

func listQuery(p *a2av1.ListTasksRequest) (listRequest, error) {
	q := tasks.ListQuery{ContextID: p.ContextID, PageToken: p.PageToken, HistoryLength: p.HistoryLength}
	if p.Status != "" && p.Status != a2av1.StateUnspecified {
		q.State = a2av1.StateTo(p.Status)
	}
	if p.PageSize != nil {
		if *p.PageSize <= 0 {
			return listRequest{}, fmt.Errorf("pageSize must be positive: %w", a2a.ErrInvalidParams)
		}
		q.PageSize = *p.PageSize
	}
	after, err := a2av1.ParseTimestamp(p.StatusTimestampAfter)
	if err != nil {
		return listRequest{}, fmt.Errorf("statusTimestampAfter: %w: %w", err, a2a.ErrInvalidParams)
	}
	q.UpdatedAfter = after
	return listRequest{query: q, withArtifacts: p.IncludeArtifacts != nil && *p.IncludeArtifacts}, nil
}

// listTasks serves ListTasks: the caller's tasks, newest status first, a page
// at a time.
func listTasks(h a2asrv.RequestHandler, ctx context.Context, r listRequest) (a2av1.ListTasksResponse, error) {
	lister, ok := h.(taskLister)
	if !ok {
		return a2av1.ListTasksResponse{}, fmt.Errorf("ListTasks: %w", a2a.ErrUnsupportedOperation)
	}
	page, err := lister.ListTasks(ctx, r.query)
	if err != nil {
		return a2av1.ListTasksResponse{}, err
	}
	out := a2av1.ListTasksResponse{Tasks: make([]a2av1.Task, 0, len(page.Tasks)), NextPageToken: page.NextPageToken, PageSize: page.PageSize, TotalSize: page.TotalSize}
	for _, t := range page.Tasks {
		out.Tasks = append(out.Tasks, *a2av1.TaskFrom(t, r.withArtifacts))
	}
	return out, nil
}
