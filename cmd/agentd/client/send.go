package client

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	Skill  string
	Client clientConfig
}

func parseSend(args []string, stderr io.Writer) (*sendConfig, error) {
	c := &sendConfig{}
	f := cli.NewFlags("send", stderr, "Sends TEXT to the A2A agent at --to, then prints the task's state and its artifact text.\nExit code: 0 when the task completed, else the exit-code table's code for its status.")
	addClientFlags(f, &c.Client, "AGENT_SEND_TO", "base URL of the agent (its card is read from /.well-known/agent-card.json)", 15*time.Minute)
	f.BoolVar(&c.Stream, "stream", false, "stream: print status updates as they arrive")
	f.EnvBool(&c.Progress, "progress", "AGENT_SEND_PROGRESS", true, "show the tree's progress on stderr while the task runs (an agentd peer's children starting and finishing): redrawn on a terminal, a line per change otherwise and with --stream on the same terminal")
	f.EnvString(&c.Skill, "skill", "AGENT_SEND_SKILL", "", "the skill of the agent's card to ask for (message metadata agentd/skill): on an agentd with --agents, it picks the agent type that runs the task")
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
	return nil
}

// Send is `agentd send`: it exits with the code of the task's status.
func Send(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseSend(args, stderr))
	if err != nil {
		return err
	}
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
	send := sendBlocking
	if c.Stream {
		send = sendStreaming
	}
	endProgress := func() {}
	if c.Progress && isAgentd(card) {
		// The tree's tasks share the root's context: one chosen here can be
		// listed from the start.
		msg.Message.ContextID = a2a.NewContextID()
		prog := &progress{hc: hc, url: to, contextID: msg.Message.ContextID, w: stderr, tty: redrawProgress(c.Stream, stdout, stderr)}
		pctx, stop := context.WithCancel(ctx)
		following := make(chan struct{})
		go func() {
			defer close(following)
			prog.follow(pctx)
		}()
		endProgress = func() {
			stop()
			<-following
			prog.finish(ctx)
		}
	}
	task, err := send(ctx, client, msg, stdout)
	endProgress()
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

// sendStreaming sends msg with message/stream, printing each event, and
// returns the task as it ended.
func sendStreaming(ctx context.Context, client *a2acall.Client, msg *a2a.MessageSendParams, stdout io.Writer) (*a2a.Task, error) {
	var task *a2a.Task
	for ev, err := range client.SendStreamingMessage(ctx, msg) {
		if err != nil {
			return nil, fmt.Errorf("stream: %w", err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			task = v
			fmt.Fprintf(stdout, "task %s: %s\n", v.ID, v.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			fmt.Fprintf(stdout, "status: %s%s\n", v.Status.State, statusText(v.Status))
		case *a2a.TaskArtifactUpdateEvent:
			fmt.Fprintf(stdout, "artifact %s: %s\n", v.Artifact.ID, partsText(v.Artifact.Parts))
		case *a2a.Message:
			fmt.Fprintf(stdout, "message: %s\n", partsText(v.Parts))
		}
	}
	if task == nil {
		return nil, errors.New("the stream carried no task")
	}
	// The stream's last word is the final state; read the whole task once.
	task, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		return nil, fmt.Errorf("tasks/get: %w", err)
	}
	return task, nil
}

// sendBlocking sends msg with message/send and returns the task once it
// ended; a reply that is a message is printed, and there is no task.
func sendBlocking(ctx context.Context, client *a2acall.Client, msg *a2a.MessageSendParams, stdout io.Writer) (*a2a.Task, error) {
	res, err := client.SendMessage(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("message/send: %w", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		if m, ok := res.(*a2a.Message); ok {
			fmt.Fprintln(stdout, partsText(m.Parts))
		}
		return nil, nil
	}
	// A server that bounds blocking sends answers with the running task: poll
	// it to its end.
	for wait := 50 * time.Millisecond; !task.Status.State.Terminal(); wait = min(2*wait, 2*time.Second) {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("task %s still %s: %w", task.ID, task.Status.State, ctx.Err())
		}
		if task, err = client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
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
