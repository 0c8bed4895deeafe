package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// Issue 32.1: a subagent asks (subagent.ask), the question reaches the
// task's caller as input-required, and the caller's answer (a message
// naming the task) is the asker's tool result.

// askScripts are scripts that ask at depth 0, 1 and 2, and the answer each
// run ends with when the caller answers "blue".
var askScripts = []struct {
	name, script, path, want string
}{
	{"depth0", "[depth 0]\nask \"Which color?\" choices=red,blue\nanswer \"root got {answer}\"\n", "0", "root got blue"},
	// The parent passes the question up (pass): the caller answers, the
	// parent's subagent.ask returns the answer and the child gets it.
	{"depth1-passed-up", "[depth 0]\nspawn sync \"child\"\npass 1\nawait\nanswer \"root: {results}\"\n" +
		"[depth 1]\nask \"Which color?\" choices=red,blue\nanswer \"child got {answer}\"\n", "0.1", "root: child got blue"},
	{"depth2-passed-up-twice", "[depth 0]\nspawn sync \"mid\"\npass 1\nawait\nanswer \"root: {results}\"\n" +
		"[depth 1]\nspawn async \"leaf\"\nawait\npass 1\nawait\nanswer \"mid: {results}\"\n" +
		"[depth 2]\nask \"Which color?\" choices=red,blue\nanswer \"leaf got {answer}\"\n", "0.1.1", "root: mid: leaf got blue"},
}

// questionOf checks that task is input-required with the question "Which
// color?" of the subagent at path, choices red and blue.
func questionOf(t *testing.T, task *a2a.Task, path string) {
	t.Helper()
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil {
		t.Fatalf("task %s: %+v, want input-required with the question", task.ID, task.Status)
	}
	m := task.Status.Message
	if txt := m.Parts[0].(a2a.TextPart).Text; txt != "Which color?" {
		t.Fatalf("the question = %q", txt)
	}
	if got := m.Metadata[api.MetaAskPath]; got != path {
		t.Fatalf("%s = %v, want %s", api.MetaAskPath, got, path)
	}
	if got := fmt.Sprint(m.Metadata[api.MetaAskChoices]); got != "[red blue]" {
		t.Fatalf("%s = %v, want [red blue]", api.MetaAskChoices, got)
	}
}

// answerTo is the message that answers task with text.
func answerTo(task *a2a.Task, text string) *a2a.MessageSendParams {
	m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.TextPart{Text: text})
	return &a2a.MessageSendParams{Message: m}
}

// A blocking send returns the input-required task; the answer, sent
// blocking too, returns the task completed with the asker's answer in it;
// at depth 0 (the root asks), 1 and 2 (each parent passes it up).
func TestAskBlocking03(t *testing.T) {
	t.Parallel()
	for _, tc := range askScripts {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startService(t, "--intelligence", "builtin:script="+writeScript(t, tc.script))
			c := s.client(t)
			ctx := context.Background()
			res, err := c.SendMessage(ctx, textMessage("pick a color"))
			if err != nil {
				t.Fatal(err)
			}
			task := res.(*a2a.Task)
			questionOf(t, task, tc.path)
			res, err = c.SendMessage(ctx, answerTo(task, "blue"))
			if err != nil {
				t.Fatal(err)
			}
			done := res.(*a2a.Task)
			if done.Status.State != a2a.TaskStateCompleted || artifactText(done) != tc.want {
				t.Fatalf("after the answer: %s %q, want completed %q", done.Status.State, artifactText(done), tc.want)
			}
		})
	}
}
