package a2acall

import (
	"context"
	"iter"

	"github.com/a2aproject/a2a-go/a2a"
)

// Transport is one way of calling an agent: a protocol version (A2A 0.3 or
// 1.0) over a binding (JSON-RPC, HTTP+JSON, gRPC). Whatever it speaks, it
// takes and answers a2a-go's types (agentd's lingua franca, as on the serving
// side) and reports the agent's errors wrapping a2a-go's sentinels
// (a2a.ErrTaskNotFound, ...), so callers need not know which it is. *Client,
// JSON-RPC 0.3, is one.
type Transport interface {
	SendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error)
	SendStreamingMessage(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error]
	GetTask(ctx context.Context, p *a2a.TaskQueryParams) (*a2a.Task, error)
	CancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error)
	ResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error]
	// The task's push notification configs: set (create) one, read one,
	// list them, delete one.
	SetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error)
	GetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error)
	ListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error)
	DeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error
}

var (
	_ Transport = (*Client)(nil)
	_ Transport = (*ClientV1)(nil)
)
