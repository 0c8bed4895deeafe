package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// A task `agentd send` follows may stop for its caller's input
// (input-required: a subagent asks, or a gated tool call waits for a yes;
// auth-required). send shows the question, takes the answer (the next
// --answer, else a line typed on the terminal), sends it as a message naming
// the task, the way it sent the first one, and follows the task on. With no
// answer to give (no --answer left, stdin not a terminal, or the terminal's
// input closed) it prints the question on stdout and exits
// api.ExitInputRequired: a script answers later with --task.

// question is what a task that stopped for input asks its caller: its
// status message, and agentd's metadata on it (docs/asking.md).
type question struct {
	task      a2a.TaskID
	contextID string
	state     a2a.TaskState
	text      string
	path      string   // the asking subagent's agent path
	choices   []string // the answers offered, if any
	tool      string   // an approval: the gated call's tool
	arguments string   // and its arguments, as JSON
}

// interrupted reports whether a task in state s waits for its caller.
func interrupted(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// questionOf reads the question of task id in status st.
func questionOf(id a2a.TaskID, contextID string, st a2a.TaskStatus) *question {
	q := &question{task: id, contextID: contextID, state: st.State}
	m := st.Message
	if m == nil {
		return q
	}
	q.text = partsText(m.Parts)
	q.path, _ = m.Metadata[api.MetaAskPath].(string)
	if cs, ok := m.Metadata[api.MetaAskChoices].([]any); ok {
		for _, c := range cs {
			if s, ok := c.(string); ok {
				q.choices = append(q.choices, s)
			}
		}
	}
	q.tool, _ = m.Metadata[api.MetaAskTool].(string)
	if a, ok := m.Metadata[api.MetaAskArguments]; ok {
		if b, err := json.Marshal(a); err == nil {
			q.arguments = string(b)
		}
	}
	return q
}

// write shows q: a first line as send's last one ("task ID: STATE (TEXT)"),
// then one line for each of agentd's details present. What the server sent
// is shown harmless: a control character other than a line break or a tab
// (a terminal's escape) is U+FFFD.
func (q *question) write(w io.Writer) {
	text := q.text
	if text == "" {
		text = "no message"
	}
	fmt.Fprintf(w, "task %s: %s (%s)\n", harmless(string(q.task)), q.state, harmless(text))
	if q.path != "" {
		fmt.Fprintf(w, "  asked by: subagent %s\n", harmless(q.path))
	}
	if q.tool != "" {
		fmt.Fprintf(w, "  tool: %s\n", harmless(q.tool))
		fmt.Fprintf(w, "  arguments: %s\n", harmless(q.arguments))
	}
	if len(q.choices) > 0 {
		fmt.Fprintf(w, "  choices: %s\n", harmless(strings.Join(q.choices, ", ")))
	}
}

// harmless replaces each control character of s but a line break or a tab
// with U+FFFD.
func harmless(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return utf8.RuneError
		}
		return r
	}, s)
}

// answerMessage is the message that answers q with text.
func answerMessage(q *question, text string) *a2a.MessageSendParams {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.TaskID, m.ContextID = q.task, q.contextID
	return &a2a.MessageSendParams{Message: m}
}

// answerer gives the answers to a task's questions. Not safe for concurrent
// use.
type answerer struct {
	answers []string // the --answer values not used yet
	// lines reads the terminal's input, a line at a time; nil when stdin is
	// not a terminal.
	lines *bufio.Reader
	w     io.Writer // where a question is shown and the prompt written (stderr)
	out   io.Writer // where a question no one answers is printed (stdout)
	to    string    // --to, for the hint on answering later
}

// answer returns the answer to q: the next --answer, else a line typed on
// the terminal (an empty one asks again). With neither it prints q on
// stdout and returns the exit error of api.ExitInputRequired, whose message
// says how to answer later.
func (a *answerer) answer(ctx context.Context, q *question) (string, error) {
	if len(a.answers) > 0 {
		q.write(a.w)
		text := a.answers[0]
		a.answers = a.answers[1:]
		fmt.Fprintf(a.w, "answer (--answer): %s\n", text)
		return text, nil
	}
	if a.lines != nil {
		q.write(a.w)
	}
	for a.lines != nil {
		fmt.Fprint(a.w, "answer: ")
		line, err := a.readLine(ctx)
		if err != nil {
			fmt.Fprintln(a.w)
			if ctx.Err() != nil {
				return "", fmt.Errorf("read the answer: %w", context.Cause(ctx))
			}
			break // the input closed: no answer here
		}
		if text := strings.TrimSpace(line); text != "" {
			return text, nil
		}
	}
	why := "no --answer left, stdin not a terminal"
	if a.lines != nil {
		why = "the terminal's input ended"
	}
	q.write(a.out)
	return "", &cli.ExitError{Code: api.ExitInputRequired, Err: fmt.Errorf("task %s waits for an answer and none was given (%s): answer it with agentd send --to %s --task %s ANSWER", q.task, why, a.to, q.task)}
}

// readLine reads one line of the terminal, or returns ctx's error when ctx
// ends first (the read goes on in the background; the command is ending).
func (a *answerer) readLine(ctx context.Context) (string, error) {
	type read struct {
		line string
		err  error
	}
	got := make(chan read, 1)
	go func() {
		line, err := a.lines.ReadString('\n')
		if err == io.EOF && line != "" {
			err = nil
		}
		got <- read{line, err}
	}()
	select {
	case r := <-got:
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
