package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/api"
)

// progressInterval is how often `agentd send` lists the tree's tasks while
// its task runs.
const progressInterval = 250 * time.Millisecond

// maxProgressRows bounds the rows the terminal view redraws.
const maxProgressRows = 20

// progress shows, on stderr, the tree of a task sent to an agentd: every
// subagent of the tree is an A2A task of the root's context (its metadata
// names its agent path and parent), so send gives its message a context id of
// its own and lists that context's tasks (ListTasks, A2A 1.0, only the
// caller's own) while the task runs. On a terminal it redraws one row per
// subagent; otherwise it prints a plain line when a child starts and when it
// finishes. Not safe for concurrent use: one goroutine runs it.
type progress struct {
	hc        *http.Client
	url       string
	contextID string
	w         io.Writer
	tty       bool
	// rootText is the root's objective as send sent it: the list's one
	// history message of a task is its latest, which for a root that asked
	// is the caller's answer. Empty: what the list shows.
	rootText string

	tasks map[string]*progressTask // by task id
	after string                   // statusTimestampAfter of the next list
	drawn int                      // rows on screen (tty)
	view  string                   // what they show
	off   bool                     // the peer does not list tasks: stop
}

type progressTask struct {
	id, path, objective string
	root                bool
	state               a2a.TaskState
	status, cause       string // agentd's exact status once it ended
	printed             a2a.TaskState
}

// isAgentd reports whether the card is an agentd's (it declares the contract
// extension), whose tree send can follow.
func isAgentd(card *a2a.AgentCard) bool {
	for _, e := range card.Capabilities.Extensions {
		if e.URI == a2abind.ContractExtensionURI {
			return true
		}
	}
	return false
}

// follow lists the tree every progressInterval until ctx ends, then once
// more, so the view ends with every child's final state.
func (p *progress) follow(ctx context.Context) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.poll(ctx)
			if p.off {
				return
			}
		}
	}
}

// finish lists the tree one last time (within a second) and draws it.
func (p *progress) finish(ctx context.Context) {
	if p.off {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	p.poll(ctx)
}

// poll lists the tasks of the context changed since the last list and shows
// what changed.
func (p *progress) poll(ctx context.Context) {
	for page := ""; ; {
		size, hist := 100, 1
		req := a2av1.ListTasksRequest{ContextID: p.contextID, PageSize: &size, HistoryLength: &hist, StatusTimestampAfter: p.after, PageToken: page}
		var params map[string]any
		b, _ := json.Marshal(req)
		_ = json.Unmarshal(b, &params)
		raw, err := callOperator(ctx, p.hc, p.url, a2av1.MethodListTasks, params)
		if err != nil {
			if ctx.Err() == nil && strings.Contains(err.Error(), "error -32601") {
				p.off = true // an agentd without ListTasks
			}
			return
		}
		var res a2av1.ListTasksResponse
		if json.Unmarshal(raw, &res) != nil {
			p.off = true
			return
		}
		for i := range res.Tasks {
			p.saw(&res.Tasks[i])
		}
		if res.NextPageToken == "" {
			break
		}
		page = res.NextPageToken
	}
	p.draw()
}

// saw records one task as listed.
func (p *progress) saw(t *a2av1.Task) {
	if p.tasks == nil {
		p.tasks = map[string]*progressTask{}
	}
	pt, ok := p.tasks[t.ID]
	if !ok {
		pt = &progressTask{id: t.ID}
		p.tasks[t.ID] = pt
		path, _ := t.Metadata[api.MetaAgentPath].(string)
		_, nested := t.Metadata[api.MetaParentTask]
		pt.root = !nested
		if pt.root && path == "" {
			path = "0"
		}
		pt.path = path
		if len(t.History) > 0 {
			var text []string
			for _, part := range t.History[0].Parts {
				if part.Text != nil {
					text = append(text, *part.Text)
				}
			}
			pt.objective = strings.Join(strings.Fields(strings.Join(text, " ")), " ")
		}
		if pt.root && p.rootText != "" {
			pt.objective = strings.Join(strings.Fields(p.rootText), " ")
		}
	}
	pt.state = a2av1.StateTo(t.Status.State)
	pt.status, _ = t.Metadata[api.MetaStatus].(string)
	pt.cause, _ = t.Metadata[api.MetaCause].(string)
	if ts := t.Status.Timestamp; ts > p.after {
		p.after = ts // RFC 3339 in UTC: the strings order as the times do
	}
}

// label is a task's state as shown: agentd's exact status once it ended.
func (pt *progressTask) label() string {
	s := string(pt.state)
	if pt.state.Terminal() && pt.status != "" {
		s = pt.status
	}
	if pt.cause != "" {
		s += " (" + pt.cause + ")"
	}
	return s
}

// draw shows the changes: the rows again on a terminal, a line per child
// that started or ended otherwise.
func (p *progress) draw() {
	rows := make([]*progressTask, 0, len(p.tasks))
	for _, t := range p.tasks {
		rows = append(rows, t)
	}
	sort.Slice(rows, func(i, j int) bool { return pathLess(rows[i].path, rows[j].path) })
	var b strings.Builder
	if !p.tty {
		for _, t := range rows {
			if t.root || t.printed == t.state || (t.printed != "" && !t.state.Terminal()) {
				continue
			}
			switch {
			case t.state.Terminal() && t.printed == "":
				fmt.Fprintf(&b, "child %s %s: %s\n", t.path, t.label(), clipText(t.objective, 60))
			case t.state.Terminal():
				fmt.Fprintf(&b, "child %s %s\n", t.path, t.label())
			default:
				fmt.Fprintf(&b, "child %s started: %s\n", t.path, clipText(t.objective, 60))
			}
			t.printed = t.state
		}
		io.WriteString(p.w, b.String())
		return
	}
	var view strings.Builder
	n := 0
	for i, t := range rows {
		if i == maxProgressRows {
			fmt.Fprintf(&view, "\x1b[2K  ... and %d more\n", len(rows)-maxProgressRows)
			n++
			break
		}
		indent := strings.Repeat("  ", strings.Count(t.path, "."))
		fmt.Fprintf(&view, "\x1b[2K%s%-6s %-22s %s\n", indent, t.path, t.label(), clipText(t.objective, 50))
		n++
	}
	if view.String() == p.view {
		return
	}
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dF", p.drawn) // to the start of the first row
	}
	b.WriteString(view.String())
	p.drawn, p.view = n, view.String()
	io.WriteString(p.w, b.String())
}

// pathLess orders agent paths numerically part by part (0.2 before 0.10).
func pathLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		if len(pa[i]) != len(pb[i]) {
			return len(pa[i]) < len(pb[i])
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// clipText cuts s to n characters.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// restart makes the next draw start afresh below whatever was printed since
// the last one (a question): on a terminal the rows are drawn again, not
// over it.
func (p *progress) restart() {
	p.drawn, p.view = 0, ""
}
