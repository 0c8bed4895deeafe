package a2abind

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// asking is a peer's task stopped at state with a status message of text
// and metadata (no message when both are empty).
func asking(state a2a.TaskState, text string, meta map[string]any) *a2a.Task {
	t := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: state}}
	if text != "" || meta != nil {
		t.Status.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: text})
		t.Status.Message.Metadata = meta
	}
	return t
}

// A peer's question: its text, its choices (any peer's), the asker's path
// (an agentd peer's, joined under the delegation's; any other peer's asker
// is the delegation), Auth for auth-required, an agentd peer's approval's
// tool and arguments; no text makes a question naming the peer and its
// task; a text too long is clipped; choices out of bounds are none.
func TestQuestionFromTask(t *testing.T) {
	meta := map[string]any{api.MetaAskPath: "0.2.1", api.MetaAskChoices: []any{"red", "blue"}}
	for _, tc := range []struct {
		name   string
		task   *a2a.Task
		agentd bool
		under  string
		want   api.Question
	}{
		{"agentd", asking(a2a.TaskStateInputRequired, "Which color?", meta), true, "0.1",
			api.Question{Text: "Which color?", Choices: []string{"red", "blue"}, AgentPath: "0.1.2.1"}},
		{"agentd root asks", asking(a2a.TaskStateInputRequired, "Which color?", map[string]any{api.MetaAskPath: "0"}), true, "0.4",
			api.Question{Text: "Which color?", AgentPath: "0.4"}},
		{"routed", asking(a2a.TaskStateInputRequired, "Which color?", meta), true, "",
			api.Question{Text: "Which color?", Choices: []string{"red", "blue"}, AgentPath: "0.2.1"}},
		{"plain peer: its path is not read", asking(a2a.TaskStateInputRequired, "Which color?", meta), false, "0.1",
			api.Question{Text: "Which color?", Choices: []string{"red", "blue"}, AgentPath: "0.1"}},
		{"a path of another shape", asking(a2a.TaskStateInputRequired, "q", map[string]any{api.MetaAskPath: "x.1"}), true, "0.1",
			api.Question{Text: "q", AgentPath: "0.1"}},
		{"a path with an empty step", asking(a2a.TaskStateInputRequired, "q", map[string]any{api.MetaAskPath: "0..1"}), true, "0.1",
			api.Question{Text: "q", AgentPath: "0.1"}},
		{"auth", asking(a2a.TaskStateAuthRequired, "Sign in.", nil), false, "0.1",
			api.Question{Text: "Sign in.", AgentPath: "0.1", Auth: true}},
		{"no text", asking(a2a.TaskStateInputRequired, "", nil), false, "0.1",
			api.Question{Text: "Peer b asks for input to go on (its task t1 is input-required, with no question text).", AgentPath: "0.1"}},
		{"auth, no text", asking(a2a.TaskStateAuthRequired, "  ", nil), false, "0.1",
			api.Question{Text: "Peer b asks for authentication to go on (its task t1 is auth-required, with no text saying how).", AgentPath: "0.1", Auth: true}},
		{"choices not strings", asking(a2a.TaskStateInputRequired, "q", map[string]any{api.MetaAskChoices: []any{"a", 2}}), false, "0.1",
			api.Question{Text: "q", AgentPath: "0.1"}},
		{"a choice too long", asking(a2a.TaskStateInputRequired, "q", map[string]any{api.MetaAskChoices: []any{strings.Repeat("x", api.MaxChoice+1)}}), false, "0.1",
			api.Question{Text: "q", AgentPath: "0.1"}},
		{"an approval", asking(a2a.TaskStateInputRequired, "Approve?", map[string]any{api.MetaAskPath: "0.1", api.MetaAskTool: "subagent.exec", api.MetaAskArguments: map[string]any{"argv": []any{"ls"}}}), true, "0.2",
			api.Question{Text: "Approve?", AgentPath: "0.2.1", Tool: "subagent.exec", Arguments: []byte(`{"argv":["ls"]}`)}},
	} {
		got := QuestionFromTask(tc.task, "b", tc.agentd, tc.under)
		if got.Text != tc.want.Text || strings.Join(got.Choices, ",") != strings.Join(tc.want.Choices, ",") || got.AgentPath != tc.want.AgentPath ||
			got.Auth != tc.want.Auth || got.Tool != tc.want.Tool || string(got.Arguments) != string(tc.want.Arguments) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	long := QuestionFromTask(asking(a2a.TaskStateInputRequired, strings.Repeat("é", api.MaxQuestion), nil), "b", false, "0")
	if len(long.Text) > api.MaxQuestion || !strings.HasSuffix(long.Text, " [clipped]") || !strings.HasPrefix(long.Text, "éé") {
		t.Fatalf("a long question: %d bytes, ends %q", len(long.Text), long.Text[len(long.Text)-12:])
	}
}

// A question marked Auth asks the task's caller with auth-required, any
// other with input-required; the answer to a peer names its task.
func TestQuestionStatusAndAnswer(t *testing.T) {
	task := &a2a.Task{ID: "t1", ContextID: "c1"}
	if ev := QuestionStatus(task, api.Question{Text: "Sign in.", AgentPath: "0.1", Auth: true}); ev.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("auth: %s", ev.Status.State)
	}
	if ev := QuestionStatus(task, api.Question{Text: "q", AgentPath: "0"}); ev.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("input: %s", ev.Status.State)
	}
	m := AnswerMessage(task, "m1", "blue")
	if m.ID != "m1" || m.TaskID != "t1" || m.ContextID != "c1" || m.Role != a2a.MessageRoleUser || m.Parts[0].(a2a.TextPart).Text != "blue" {
		t.Fatalf("answer %+v", m)
	}
}
