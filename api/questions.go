package api

import (
	"encoding/json"
	"time"
)

// QuestionsParams filters a2a.Questions: TaskID, when set, lists only that
// task's question.
type QuestionsParams struct {
	TaskID string `json:"task_id,omitempty"`
}

// QuestionsResult lists the questions tasks wait on (input-required), the
// longest waiting first.
type QuestionsResult struct {
	Questions []PendingQuestion `json:"questions"`
}

// PendingQuestion is one task's question to its caller: a subagent's
// subagent.ask, or an approval gate's (Tool set: the call waiting for a
// yes, with its arguments).
type PendingQuestion struct {
	TaskID    string `json:"task_id"`
	ContextID string `json:"context_id"`
	// AgentPath and Handle name the subagent that asks (Handle, its task
	// id, when it is live here).
	AgentPath string   `json:"agent_path"`
	Handle    string   `json:"handle,omitempty"`
	Text      string   `json:"text"`
	Choices   []string `json:"choices,omitempty"`
	// Tool and Arguments make it an approval: "yes" runs the call, any
	// other answer refuses it.
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Caller is the task's creator, who the question is put to (its
	// SPIFFE ID or token:NAME; "anonymous" in the development mode).
	Caller string    `json:"caller"`
	Since  time.Time `json:"since"`
	// Deadline is when --input-timeout fails the task; absent when no
	// timeout is set.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// AnswerParams answers the question task TaskID waits on, on its caller's
// behalf: Answer is 1 byte to MaxAnswer of text. For an approval "yes" (any
// case) runs the call; anything else refuses it, and the model sees the
// answer.
type AnswerParams struct {
	TaskID string `json:"task_id"`
	Answer string `json:"answer"`
}

// AnswerResult reports an answer taken: the task is working again.
type AnswerResult struct {
	TaskID     string `json:"task_id"`
	State      string `json:"state"`
	AnsweredBy string `json:"answered_by"`
}
