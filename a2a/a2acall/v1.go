package a2acall

import (
	"context"
	"iter"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2av1"
)

// VersionHeader is the HTTP header that names the protocol version of a
// request (A2A 1.0; a request without it is 0.3).
const VersionHeader = "A2A-Version"

// ClientV1 calls one agent's JSON-RPC endpoint in A2A 1.0: the 1.0 method
// names (SendMessage, GetTask, ...), the A2A-Version: 1.0 header and the 1.0
// wire shapes (a2av1), converted from and to a2a-go's types so that it is a
// Transport like Client. It is safe for concurrent use; create it with
// NewV1.
type ClientV1 struct {
	c *Client
}

// NewV1 returns a 1.0 client of the JSON-RPC endpoint at url over hc
// (http.DefaultClient if nil).
func NewV1(url string, hc *http.Client, opts Options) *ClientV1 {
	c := New(url, hc, opts)
	c.version = a2av1.Version
	return &ClientV1{c: c}
}

// SendMessage sends SendMessage and returns the task or the message the
// agent answered. A send that is not blocking asks the agent to return
// immediately.
func (v *ClientV1) SendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	p = v.c.withBlocking(p)
	raw, err := v.c.call(ctx, a2av1.MethodSendMessage, a2av1.SendParamsFrom(p), false)
	if err != nil {
		return nil, err
	}
	res, err := a2av1.DecodeSendResult(raw)
	if err != nil {
		return nil, resultErr(a2av1.MethodSendMessage, err)
	}
	return res, nil
}

// SendStreamingMessage sends SendStreamingMessage and yields the stream's
// events until it ends, an error (the last yield), or the caller stops.
func (v *ClientV1) SendStreamingMessage(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return v.c.stream(ctx, a2av1.MethodSendStreamingMessage, a2av1.SendParamsFrom(p), a2av1.DecodeEvent)
}

// GetTask sends GetTask.
func (v *ClientV1) GetTask(ctx context.Context, p *a2a.TaskQueryParams) (*a2a.Task, error) {
	return v.task(ctx, a2av1.MethodGetTask, a2av1.GetTaskRequest{ID: string(p.ID), HistoryLength: p.HistoryLength})
}

// CancelTask sends CancelTask and returns the task as the agent answered.
func (v *ClientV1) CancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	return v.task(ctx, a2av1.MethodCancelTask, a2av1.CancelTaskRequest{ID: string(p.ID), Metadata: p.Metadata})
}

// ResubscribeToTask sends SubscribeToTask and yields the task's events as
// SendStreamingMessage does.
func (v *ClientV1) ResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return v.c.stream(ctx, a2av1.MethodSubscribeToTask, a2av1.SubscribeToTaskRequest{ID: string(p.ID)}, a2av1.DecodeEvent)
}

// SetTaskPushConfig sends CreateTaskPushNotificationConfig and returns the
// config as the agent stored it.
func (v *ClientV1) SetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	raw, err := v.c.call(ctx, a2av1.MethodCreatePushConfig, a2av1.PushConfigFrom(p.TaskID, p.Config), false)
	return pushConfigV1(a2av1.MethodCreatePushConfig, raw, err)
}

// GetTaskPushConfig sends GetTaskPushNotificationConfig.
func (v *ClientV1) GetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	req := a2av1.GetTaskPushNotificationConfigRequest{TaskID: string(p.TaskID), ID: p.ConfigID}
	raw, err := v.c.call(ctx, a2av1.MethodGetPushConfig, req, false)
	return pushConfigV1(a2av1.MethodGetPushConfig, raw, err)
}

// ListTaskPushConfig sends ListTaskPushNotificationConfigs (its first page).
func (v *ClientV1) ListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	req := a2av1.ListTaskPushNotificationConfigsRequest{TaskID: string(p.TaskID)}
	raw, err := v.c.call(ctx, a2av1.MethodListPushConfigs, req, false)
	if err != nil {
		return nil, err
	}
	out, err := a2av1.DecodePushConfigList(raw)
	if err != nil {
		return nil, resultErr(a2av1.MethodListPushConfigs, err)
	}
	return out, nil
}

// DeleteTaskPushConfig sends DeleteTaskPushNotificationConfig.
func (v *ClientV1) DeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	req := a2av1.GetTaskPushNotificationConfigRequest{TaskID: string(p.TaskID), ID: p.ConfigID}
	_, err := v.c.call(ctx, a2av1.MethodDeletePushConfig, req, true)
	return err
}

func (v *ClientV1) task(ctx context.Context, method string, params any) (*a2a.Task, error) {
	raw, err := v.c.call(ctx, method, params, false)
	if err != nil {
		return nil, err
	}
	t, err := a2av1.DecodeTask(raw)
	if err != nil {
		return nil, resultErr(method, err)
	}
	return t, nil
}

func pushConfigV1(method string, raw []byte, err error) (*a2a.TaskPushConfig, error) {
	if err != nil {
		return nil, err
	}
	c, err := a2av1.DecodePushConfig(raw)
	if err != nil {
		return nil, resultErr(method, err)
	}
	return c, nil
}
