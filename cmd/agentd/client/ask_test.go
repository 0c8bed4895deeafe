package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// approval is the input-required status of a gated exec call, as agentd
// sends it, with a terminal escape in its text and arguments.
func approval() a2a.TaskStatus {
	m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "Approve \x1b[2Jit?\nyes or no"})
	m.Metadata = map[string]any{
		api.MetaAskPath: "0.2", api.MetaAskChoices: []any{"yes", "no"},
		api.MetaAskTool: api.ToolExec, api.MetaAskArguments: map[string]any{"argv": []any{"rm", "\x1b[31m"}},
	}
	return a2a.TaskStatus{State: a2a.TaskStateInputRequired, Message: m}
}

// TestQuestionShown: the question shows its text, asker, the gated call and
// the choices, a terminal escape made harmless; the answer names the task
// and its context.
func TestQuestionShown(t *testing.T) {
	q := questionOf("t1", "c1", approval())
	var b bytes.Buffer
	q.write(&b)
	want := "task t1: input-required (Approve \uFFFD[2Jit?\nyes or no)\n  asked by: subagent 0.2\n  tool: subagent.exec\n" +
		"  arguments: {\"argv\":[\"rm\",\"\\u001b[31m\"]}\n  choices: yes, no\n"
	if b.String() != want {
		t.Fatalf("shown:\n%q\nwant:\n%q", b.String(), want)
	}
	m := answerMessage(q, "yes").Message
	if m.TaskID != "t1" || m.ContextID != "c1" || m.Role != a2a.MessageRoleUser || partsText(m.Parts) != "yes" {
		t.Fatalf("the answer: %+v", m)
	}
	var none bytes.Buffer
	questionOf("t2", "c2", a2a.TaskStatus{State: a2a.TaskStateAuthRequired}).write(&none)
	if none.String() != "task t2: auth-required (no message)\n" {
		t.Fatalf("a question with no message: %q", none.String())
	}
}

// TestAnswererOrder: the --answer values answer first, in order; then the
// terminal's lines (an empty one asks again); once its input ends, the
// question is printed on stdout and the exit code is 8. Off a terminal with
// no --answer the question goes to stdout alone.
func TestAnswererOrder(t *testing.T) {
	var shown, out bytes.Buffer
	a := &answerer{answers: []string{"one", "two"}, lines: bufio.NewReader(strings.NewReader("\n  \nthree\n")), w: &shown, out: &out, to: "http://x"}
	q := questionOf("t1", "c1", approval())
	ctx := context.Background()
	for _, want := range []string{"one", "two", "three"} {
		got, err := a.answer(ctx, q)
		if err != nil || got != want {
			t.Fatalf("answer %q, %v; want %q", got, err, want)
		}
	}
	if n := strings.Count(shown.String(), "answer: "); n != 3 {
		t.Errorf("the terminal was prompted %d times for its answer, want 3 (two empty lines):\n%s", n, shown.String())
	}
	if !strings.Contains(shown.String(), "answer (--answer): two\n") || out.Len() != 0 {
		t.Errorf("shown:\n%s\nstdout:\n%s", shown.String(), out.String())
	}
	_, err := a.answer(ctx, q)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != api.ExitInputRequired || !strings.Contains(err.Error(), "agentd send --to http://x --task t1 ANSWER") ||
		!strings.Contains(err.Error(), "the terminal's input ended") || !strings.HasPrefix(out.String(), "task t1: input-required (") {
		t.Fatalf("the input ended: %v\nstdout:\n%s", err, out.String())
	}

	shown.Reset()
	out.Reset()
	off := &answerer{w: &shown, out: &out, to: "http://x"}
	if _, err := off.answer(ctx, q); !errors.As(err, &ee) || ee.Code != api.ExitInputRequired || !strings.Contains(err.Error(), "no --answer left, stdin not a terminal") {
		t.Fatalf("off a terminal: %v", err)
	}
	if shown.Len() != 0 || !strings.Contains(out.String(), "  choices: yes, no\n") {
		t.Fatalf("off a terminal: shown %q, stdout %q", shown.String(), out.String())
	}
}

// TestProgressRootText: the root's row shows the text send sent, not the
// latest message of its history (the caller's answer, once it asked).
func TestProgressRootText(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, tty: true, rootText: "when is\nthe release?"}
	answer := "2.0"
	p.saw(&a2av1.Task{ID: "r", Status: a2av1.TaskStatus{State: "TASK_STATE_WORKING"}, History: []a2av1.Message{{Parts: []a2av1.Part{{Text: &answer}}}}})
	p.draw()
	if !strings.Contains(b.String(), "when is the release?") || strings.Contains(b.String(), "2.0") {
		t.Fatalf("the root's row: %q", b.String())
	}
	// After a question the view draws anew below it, not over it.
	p.restart()
	b.Reset()
	p.draw()
	if regexp.MustCompile(`\x1b\[\d+F`).MatchString(b.String()) || !strings.Contains(b.String(), "when is the release?") {
		t.Fatalf("the view after a question: %q", b.String())
	}
}
