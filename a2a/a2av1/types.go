package a2av1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Version is the protocol version this package speaks, as the A2A-Version
// header and agent card interfaces name it.
const Version = "1.0"

// JSON-RPC method names of A2A 1.0.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodListTasks            = "ListTasks"
	MethodCancelTask           = "CancelTask"
	MethodSubscribeToTask      = "SubscribeToTask"
	MethodCreatePushConfig     = "CreateTaskPushNotificationConfig"
	MethodGetPushConfig        = "GetTaskPushNotificationConfig"
	MethodListPushConfigs      = "ListTaskPushNotificationConfigs"
	MethodDeletePushConfig     = "DeleteTaskPushNotificationConfig"
	MethodGetExtendedAgentCard = "GetExtendedAgentCard"
)

// Methods lists every 1.0 method name.
var Methods = []string{
	MethodSendMessage, MethodSendStreamingMessage, MethodGetTask, MethodListTasks,
	MethodCancelTask, MethodSubscribeToTask, MethodCreatePushConfig, MethodGetPushConfig,
	MethodListPushConfigs, MethodDeletePushConfig, MethodGetExtendedAgentCard,
}

// IsMethod reports whether name is an A2A 1.0 JSON-RPC method.
func IsMethod(name string) bool {
	for _, m := range Methods {
		if m == name {
			return true
		}
	}
	return false
}

// TaskState is the proto enum TaskState, encoded by name.
type TaskState string

// The task states of A2A 1.0.
const (
	StateUnspecified   TaskState = "TASK_STATE_UNSPECIFIED"
	StateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	StateWorking       TaskState = "TASK_STATE_WORKING"
	StateCompleted     TaskState = "TASK_STATE_COMPLETED"
	StateFailed        TaskState = "TASK_STATE_FAILED"
	StateCanceled      TaskState = "TASK_STATE_CANCELED"
	StateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      TaskState = "TASK_STATE_REJECTED"
	StateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

// taskStates is the enum in proto number order.
var taskStates = []TaskState{
	StateUnspecified, StateSubmitted, StateWorking, StateCompleted, StateFailed,
	StateCanceled, StateInputRequired, StateRejected, StateAuthRequired,
}

// UnmarshalJSON accepts the enum name or its number, as proto3 JSON parsers do.
func (s *TaskState) UnmarshalJSON(b []byte) error {
	v, err := enumValue(b, len(taskStates))
	if err != nil {
		return fmt.Errorf("task state: %w", err)
	}
	if v.isNum {
		*s = taskStates[v.num]
		return nil
	}
	for _, st := range taskStates {
		if string(st) == v.name {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("task state: unknown value %q", v.name)
}

// MarshalJSON encodes the state by name; the zero value is the proto default,
// TASK_STATE_UNSPECIFIED.
func (s TaskState) MarshalJSON() ([]byte, error) {
	if s == "" {
		s = StateUnspecified
	}
	return json.Marshal(string(s))
}

// Role is the proto enum Role, encoded by name.
type Role string

// The message roles of A2A 1.0.
const (
	RoleUnspecified Role = "ROLE_UNSPECIFIED"
	RoleUser        Role = "ROLE_USER"
	RoleAgent       Role = "ROLE_AGENT"
)

var roles = []Role{RoleUnspecified, RoleUser, RoleAgent}

// UnmarshalJSON accepts the enum name or its number.
func (r *Role) UnmarshalJSON(b []byte) error {
	v, err := enumValue(b, len(roles))
	if err != nil {
		return fmt.Errorf("role: %w", err)
	}
	if v.isNum {
		*r = roles[v.num]
		return nil
	}
	for _, x := range roles {
		if string(x) == v.name {
			*r = x
			return nil
		}
	}
	return fmt.Errorf("role: unknown value %q", v.name)
}

// MarshalJSON encodes the role by name; the zero value is the proto default,
// ROLE_UNSPECIFIED.
func (r Role) MarshalJSON() ([]byte, error) {
	if r == "" {
		r = RoleUnspecified
	}
	return json.Marshal(string(r))
}

type enumVal struct {
	name  string
	num   int
	isNum bool
}

func enumValue(b []byte, n int) (enumVal, error) {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, `"`) {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return enumVal{}, err
		}
		return enumVal{name: name}, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n {
		return enumVal{}, fmt.Errorf("want an enum name or a number in [0, %d), got %s", n, s)
	}
	return enumVal{num: i, isNum: true}, nil
}

// Part is one piece of content: exactly one of Text, Raw, URL or Data is set.
type Part struct {
	Text      *string         `json:"text,omitempty" proto:"text"`
	Raw       *Bytes          `json:"raw,omitempty" proto:"raw"`
	URL       *string         `json:"url,omitempty" proto:"url"`
	Data      json.RawMessage `json:"data,omitempty" proto:"data"`
	Metadata  map[string]any  `json:"metadata,omitempty" proto:"metadata"`
	Filename  string          `json:"filename,omitempty" proto:"filename"`
	MediaType string          `json:"mediaType,omitempty" proto:"media_type"`
}

// Message is one turn of communication between a client and an agent.
type Message struct {
	MessageID        string         `json:"messageId" proto:"message_id"`
	ContextID        string         `json:"contextId,omitempty" proto:"context_id"`
	TaskID           string         `json:"taskId,omitempty" proto:"task_id"`
	Role             Role           `json:"role" proto:"role"`
	Parts            []Part         `json:"parts" proto:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty" proto:"metadata"`
	Extensions       []string       `json:"extensions,omitempty" proto:"extensions"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty" proto:"reference_task_ids"`
}

// TaskStatus is a task's state at one moment.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// Task is a stateful unit of work.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId,omitempty"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatusUpdateEvent reports a status change.
type TaskStatusUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskArtifactUpdateEvent reports a new or changed artifact.
type TaskArtifactUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  Artifact       `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// StreamResponse is one event of a stream or a push notification: exactly one
// field is set.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageResponse is the result of SendMessage: exactly one field is set.
type SendMessageResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

// AuthenticationInfo is how agentd authenticates to a push webhook.
type AuthenticationInfo struct {
	Scheme      string `json:"scheme" proto:"scheme"`
	Credentials string `json:"credentials,omitempty" proto:"credentials"`
}

// TaskPushNotificationConfig is a webhook registered for a task.
type TaskPushNotificationConfig struct {
	Tenant         string              `json:"tenant,omitempty" proto:"tenant"`
	ID             string              `json:"id,omitempty" proto:"id"`
	TaskID         string              `json:"taskId,omitempty" proto:"task_id"`
	URL            string              `json:"url" proto:"url"`
	Token          string              `json:"token,omitempty" proto:"token"`
	Authentication *AuthenticationInfo `json:"authentication,omitempty" proto:"authentication"`
}

// SendMessageConfiguration tunes SendMessage.
type SendMessageConfiguration struct {
	AcceptedOutputModes        []string                    `json:"acceptedOutputModes,omitempty" proto:"accepted_output_modes"`
	TaskPushNotificationConfig *TaskPushNotificationConfig `json:"taskPushNotificationConfig,omitempty" proto:"task_push_notification_config"`
	HistoryLength              *int                        `json:"historyLength,omitempty" proto:"history_length"`
	ReturnImmediately          bool                        `json:"returnImmediately,omitempty" proto:"return_immediately"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty" proto:"tenant"`
	Message       *Message                  `json:"message" proto:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty" proto:"configuration"`
	Metadata      map[string]any            `json:"metadata,omitempty" proto:"metadata"`
}

// GetTaskRequest is the params of GetTask.
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty" proto:"tenant"`
	ID            string `json:"id" proto:"id"`
	HistoryLength *int   `json:"historyLength,omitempty" proto:"history_length"`
}

// ListTasksRequest is the params of ListTasks.
type ListTasksRequest struct {
	Tenant               string    `json:"tenant,omitempty" proto:"tenant"`
	ContextID            string    `json:"contextId,omitempty" proto:"context_id"`
	Status               TaskState `json:"status,omitempty" proto:"status"`
	PageSize             *int      `json:"pageSize,omitempty" proto:"page_size"`
	PageToken            string    `json:"pageToken,omitempty" proto:"page_token"`
	HistoryLength        *int      `json:"historyLength,omitempty" proto:"history_length"`
	StatusTimestampAfter string    `json:"statusTimestampAfter,omitempty" proto:"status_timestamp_after"`
	IncludeArtifacts     *bool     `json:"includeArtifacts,omitempty" proto:"include_artifacts"`
}

// ListTasksResponse is the result of ListTasks. NextPageToken is always
// present: empty on the last page.
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int    `json:"pageSize"`
	TotalSize     int    `json:"totalSize"`
}

// CancelTaskRequest is the params of CancelTask.
type CancelTaskRequest struct {
	Tenant   string         `json:"tenant,omitempty" proto:"tenant"`
	ID       string         `json:"id" proto:"id"`
	Metadata map[string]any `json:"metadata,omitempty" proto:"metadata"`
}

// SubscribeToTaskRequest is the params of SubscribeToTask.
type SubscribeToTaskRequest struct {
	Tenant string `json:"tenant,omitempty" proto:"tenant"`
	ID     string `json:"id" proto:"id"`
}

// GetTaskPushNotificationConfigRequest is the params of
// GetTaskPushNotificationConfig and DeleteTaskPushNotificationConfig.
type GetTaskPushNotificationConfigRequest struct {
	Tenant string `json:"tenant,omitempty" proto:"tenant"`
	TaskID string `json:"taskId" proto:"task_id"`
	ID     string `json:"id" proto:"id"`
}

// ListTaskPushNotificationConfigsRequest is the params of
// ListTaskPushNotificationConfigs.
type ListTaskPushNotificationConfigsRequest struct {
	Tenant    string `json:"tenant,omitempty" proto:"tenant"`
	TaskID    string `json:"taskId" proto:"task_id"`
	PageSize  int    `json:"pageSize,omitempty" proto:"page_size"`
	PageToken string `json:"pageToken,omitempty" proto:"page_token"`
}

// GetExtendedAgentCardRequest is the params of GetExtendedAgentCard.
type GetExtendedAgentCardRequest struct {
	Tenant string `json:"tenant,omitempty" proto:"tenant"`
}

// ListTaskPushNotificationConfigsResponse is the result of
// ListTaskPushNotificationConfigs.
type ListTaskPushNotificationConfigsResponse struct {
	Configs       []TaskPushNotificationConfig `json:"configs"`
	NextPageToken string                       `json:"nextPageToken,omitempty"`
}

// AgentInterface is one protocol binding and version the agent serves at a URL.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
}
