package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// sendConfig is `agentd send`.
type sendConfig struct {
	Stream bool
	// Progress shows the tree's children starting and finishing on stderr
	// (agentd peers only).
	Progress bool
	Text     string // the arguments, joined
	// Skill names the skill the message asks for (api.MetaSkill): with an
	// agents file, the agent type its root runs as.
	Skill string
	// Task, when set, names the task the message goes to: the answer to
	// its question, or a follow-up.
	Task string
	// Answers answer the task's questions, in order, one each.
	Answers []string
	Client  clientConfig
}

func parseSend(args []string, stderr io.Writer) (*sendConfig, error) {
	c := &sendConfig{}
	f := cli.NewFlags("send", stderr, "Sends TEXT to the A2A agent at --to, then prints the task's state and its artifact text.\nWhen the task asks (input-required), the question is shown and the answer taken from --answer or the terminal.\nExit code: 0 when the task completed, else the exit-code table's code for its status; 8 when it waits for an answer none gave.")
	addClientFlags(f, &c.Client, "AGENT_SEND_TO", "base URL of the agent (its card is read from /.well-known/agent-card.json)", 15*time.Minute)
	f.BoolVar(&c.Stream, "stream", false, "stream: print status updates as they arrive")
	f.EnvBool(&c.Progress, "progress", "AGENT_SEND_PROGRESS", true, "show the tree's progress on stderr while the task runs (an agentd peer's children starting and finishing): redrawn on a terminal, a line per change otherwise and with --stream on the same terminal")
	f.EnvString(&c.Skill, "skill", "AGENT_SEND_SKILL", "", "the skill of the agent's card to ask for (message metadata agentd/skill): on an agentd with --agents, it picks the agent type that runs the task")
	f.StringVar(&c.Task, "task", "", "send TEXT to this task (its id): the answer to its question, or a follow-up; send then follows the task to its end")
	f.Func("answer", "the answer to the task's next question (repeatable: the answers in order, one per question); with none left, a question is asked on the terminal, and off a terminal send exits 8 printing the question", func(v string) error {
		c.Answers = append(c.Answers, v)
		return nil
	})
	f.Operands = "TEXT"
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	c.Text = strings.Join(f.Args(), " ")
	return c, nil
}

// Validate checks every setting and names the bad one. It reads no file.
func (c *sendConfig) Validate() error {
	if err := c.Client.validate(); err != nil {
		return err
	}
	if strings.TrimSpace(c.Text) == "" {
		return errors.New("send needs the message TEXT as arguments")
	}
	if c.Task != "" && strings.TrimSpace(c.Task) != c.Task {
		return fmt.Errorf("--task %q: want a task id, without spaces around it", c.Task)
	}
	for i, a := range c.Answers {
		switch {
		case strings.TrimSpace(a) == "":
			return fmt.Errorf("--answer %d is empty: an answer needs text", i+1)
		case len(a) > api.MaxAnswer:
			return fmt.Errorf("--answer %d is %d bytes, over the limit of %d", i+1, len(a), api.MaxAnswer)
		}
	}
	return nil
}

// Send is `agentd send`: it exits with the code of the task's status.
func Send(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseSend(args, stderr))
	if err != nil {
		return err
	}
	var lines *bufio.Reader
	if cli.IsTerminal(os.Stdin) {
		lines = bufio.NewReader(os.Stdin)
	}
	return send(ctx, c, lines, stdout, stderr)
}

// send runs a validated `agentd send`; lines reads the terminal's input,
// nil when stdin is not a terminal.
func send(ctx context.Context, c *sendConfig, lines *bufio.Reader, stdout, stderr io.Writer) error {
	ctx, hc, done, err := c.Client.dial(ctx, stderr)
	defer done()
	if err != nil {
		return err
	}
	to := c.Client.To
	card, err := agentcard.NewResolver(hc).Resolve(ctx, to)
	if err != nil {
		return fmt.Errorf("read the agent card of %s: %w", to, err)
	}
	endpoint, err := a2acall.Endpoint(card)
	if err != nil {
		return fmt.Errorf("a2a client for %s: %w", to, err)
	}
	client := a2acall.New(endpoint, hc, a2acall.Options{})
	msg := &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: c.Text})}
	if c.Skill != "" {
		msg.Message.Metadata = map[string]any{api.MetaSkill: c.Skill}
	}
	if c.Task != "" {
		// The task's context, for the message and the progress view; and a
		// task id that is not the caller's is said now.
		t, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(c.Task)})
		if err != nil {
			return fmt.Errorf("--task %s: tasks/get: %w", c.Task, err)
		}
		msg.Message.TaskID, msg.Message.ContextID = t.ID, t.ContextID
	}
	s := &sender{client: client, stdout: stdout}
	if c.Stream {
		s.send = s.streaming
	} else {
		s.send = s.blocking
	}
	pause := func() (resume func()) { return func() {} }
	endProgress := func() {}
	if c.Progress && isAgentd(card) {
		// The tree's tasks share the root's context: one chosen here can be
		// listed from the start.
		if msg.Message.ContextID == "" {
			msg.Message.ContextID = a2a.NewContextID()
		}
		prog := &progress{hc: hc, url: to, contextID: msg.Message.ContextID, w: stderr, tty: redrawProgress(c.Stream, stdout, stderr)}
		if c.Task == "" {
			prog.rootText = c.Text
		}
		var stop context.CancelFunc
		var following chan struct{}
		start := func() {
			var pctx context.Context
			pctx, stop = context.WithCancel(ctx)
			following = make(chan struct{})
			go func() {
				defer close(following)
				prog.follow(pctx)
			}()
		}
		halt := func() {
			stop()
			<-following
		}
		start()
		pause = func() func() {
			halt()
			prog.restart()
			return start
		}
		endProgress = func() {
			halt()
			prog.finish(ctx)
		}
	}
	ans := &answerer{answers: c.Answers, lines: lines, w: stderr, out: stdout, to: to}
	s.ask = func(ctx context.Context, q *question) (string, error) {
		// The progress view stops while the question is on the screen, and
		// draws anew below it afterwards.
		resume := pause()
		text, err := ans.answer(ctx, q)
		if err == nil {
			resume()
		}
		return text, err
	}
	task, err := s.send(ctx, msg)
	endProgress()
	if n := len(ans.answers); n > 0 && err == nil {
		fmt.Fprintf(stderr, "agentd: %d --answer value(s) not used: the task asked no more questions\n", n)
	}
	if err != nil || task == nil {
		return err
	}
	fmt.Fprintf(stdout, "task %s: %s%s\n", task.ID, task.Status.State, statusText(task.Status))
	for _, art := range task.Artifacts {
		fmt.Fprintln(stdout, partsText(art.Parts))
	}
	return taskExit(task)
}

// redrawProgress reports whether the progress view is redrawn in place on
// stderr: only on a terminal, and not while --stream prints its events on the
// same screen (stdout a terminal too), where moving the cursor up would draw
// over them; there the view prints a line per change instead.
func redrawProgress(stream bool, stdout, stderr io.Writer) bool {
	return cli.IsTerminal(stderr) && !(stream && cli.IsTerminal(stdout))
}

// sender sends send's message and follows its task to the end, answering
// each question the task asks with ask's answer, sent as a message naming
// the task the same way (blocking, or streaming).
type sender struct {
	client a2acall.Transport
	stdout io.Writer
	// send is blocking or streaming.
	send func(ctx context.Context, msg *a2a.MessageSendParams) (*a2a.Task, error)
	// ask returns the answer to a question, or the error that ends send.
	ask func(ctx context.Context, q *question) (string, error)
}

// streaming sends msg with message/stream, printing each event, and returns
// the task as it ended. When the task stops for input, it stops reading the
// stream, sends the answer with message/stream too and reads that stream on.
//
// A streamed artifact (a model's answer as it is produced, a child's
// included) prints as it comes: its first piece on a line of its own after
// "artifact ID:" (and the child's agent path), the pieces appended to it on
// the same line, until its last piece or another event.
func (s *sender) streaming(ctx context.Context, msg *a2a.MessageSendParams) (*a2a.Task, error) {
	var id a2a.TaskID
	for msg != nil {
		q, err := s.stream(ctx, msg, &id)
		if err != nil {
			return nil, err
		}
		msg = nil
		if q != nil {
			text, err := s.ask(ctx, q)
			if err != nil {
				return nil, err
			}
			msg = answerMessage(q, text)
		}
	}
	if id == "" {
		return nil, errors.New("the stream carried no task")
	}
	// The stream's last word is the final state; read the whole task once.
	task, err := s.client.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("tasks/get: %w", err)
	}
	return task, nil
}

// stream reads one stream to its end, or to the task's question, which it
// returns; id is set to the task's id.
func (s *sender) stream(ctx context.Context, msg *a2a.MessageSendParams, id *a2a.TaskID) (*question, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a stream left at a question is closed
	stdout := s.stdout
	var open a2a.ArtifactID // the artifact whose line is being written
	endLine := func() {
		if open != "" {
			fmt.Fprintln(stdout)
			open = ""
		}
	}
	defer endLine()
	for ev, err := range s.client.SendStreamingMessage(ctx, msg) {
		if err != nil {
			return nil, fmt.Errorf("stream: %w", err)
		}
		if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			if !a.Append || a.Artifact.ID != open {
				endLine()
				who := ""
				if p, ok := a.Metadata[api.MetaAgentPath].(string); ok {
					who = " (" + p + ")"
				}
				fmt.Fprintf(stdout, "artifact %s%s: ", a.Artifact.ID, who)
				open = a.Artifact.ID
			}
			fmt.Fprint(stdout, partsText(a.Artifact.Parts))
			if a.LastChunk {
				endLine()
			}
			continue
		}
		endLine()
		switch v := ev.(type) {
		case *a2a.Task:
			*id = v.ID
			fmt.Fprintf(stdout, "task %s: %s\n", v.ID, v.Status.State)
			if interrupted(v.Status.State) {
				return questionOf(v.ID, v.ContextID, v.Status), nil
			}
		case *a2a.TaskStatusUpdateEvent:
			fmt.Fprintf(stdout, "status: %s%s\n", v.Status.State, statusText(v.Status))
			if interrupted(v.Status.State) {
				return questionOf(v.TaskID, v.ContextID, v.Status), nil
			}
		case *a2a.Message:
			fmt.Fprintf(stdout, "message: %s\n", partsText(v.Parts))
		}
	}
	return nil, nil
}

// blocking sends msg with message/send and returns the task once it ended;
// a reply that is a message is printed, and there is no task. A task that
// stops for input is answered with message/send too, and followed on.
func (s *sender) blocking(ctx context.Context, msg *a2a.MessageSendParams) (*a2a.Task, error) {
	for {
		task, err := s.sendOnce(ctx, msg)
		if err != nil || task == nil || !interrupted(task.Status.State) {
			return task, err
		}
		q := questionOf(task.ID, task.ContextID, task.Status)
		text, err := s.ask(ctx, q)
		if err != nil {
			return nil, err
		}
		msg = answerMessage(q, text)
	}
}

// sendOnce sends msg with message/send and returns the task once it ended
// or stopped for input.
func (s *sender) sendOnce(ctx context.Context, msg *a2a.MessageSendParams) (*a2a.Task, error) {
	res, err := s.client.SendMessage(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("message/send: %w", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		if m, ok := res.(*a2a.Message); ok {
			fmt.Fprintln(s.stdout, partsText(m.Parts))
		}
		return nil, nil
	}
	// A server that bounds blocking sends answers with the running task: poll
	// it to its end or its question.
	for wait := 50 * time.Millisecond; !task.Status.State.Terminal() && !interrupted(task.Status.State); wait = min(2*wait, 2*time.Second) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("task %s still %s: %w", task.ID, task.Status.State, ctx.Err())
		}
		if task, err = s.client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
			return nil, fmt.Errorf("tasks/get: %w", err)
		}
	}
	return task, nil
}

// taskExit maps a finished task to the exit-code table, using agentd's exact
// status from the task metadata when the peer is agentd.
func taskExit(t *a2a.Task) error {
	if t.Status.State == a2a.TaskStateCompleted {
		return nil
	}
	if s, ok := t.Metadata[api.MetaStatus].(string); ok && api.TerminalStatus(s).Valid() {
		cause, _ := t.Metadata[api.MetaCause].(string)
		return cli.ExitWith(api.ExitCode(api.SubagentResult{Status: api.TerminalStatus(s), Cause: cause}))
	}
	if t.Status.State == a2a.TaskStateRejected {
		return cli.ExitWith(api.ExitRefused)
	}
	return cli.ExitWith(api.ExitFailure)
}

func statusText(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	return " (" + partsText(s.Message.Parts) + ")"
}

func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			out = append(out, v.Text)
		case a2a.DataPart:
			out = append(out, fmt.Sprint(v.Data))
		case a2a.FilePart:
			if u, ok := v.File.(a2a.FileURI); ok {
				out = append(out, u.URI)
			}
		}
	}
	return strings.Join(out, "\n")
}
