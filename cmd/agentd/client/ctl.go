package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// ctlMethod is one operator method as `agentd ctl` offers it: its flags, and
// how the flags set become params.
type ctlMethod struct {
	summary string
	flags   func(f *cli.Flags) func(set map[string]bool) map[string]any
	result  func() any
	// operands, if set, names the method's arguments (such as "TASK
	// TEXT"), and args makes them its params, given the params its flags
	// made; a method without takes no arguments. The client's flags may
	// come before, between or after them.
	operands string
	args     func(operands []string, p map[string]any) (map[string]any, error)
}

var ctlMethods = map[string]ctlMethod{
	api.OpDrain: {
		summary: "drain like the first SIGTERM: refuse new work, stop every tree, exit",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			ms := f.Int64("deadline-ms", 0, "drain budget in milliseconds (default: the service's --drain-timeout)")
			return func(set map[string]bool) map[string]any {
				if set["deadline-ms"] {
					return map[string]any{"deadline_ms": *ms}
				}
				return nil
			}
		},
		result: func() any { return &api.DrainResult{} },
	},
	api.OpLameDuck: {
		summary: "report not ready on /readyz (or ready again with --ready); nothing else changes",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			ready := f.Bool("ready", false, "make the service ready again")
			return func(map[string]bool) map[string]any { return map[string]any{"ready": *ready} }
		},
		result: func() any { return &api.LameDuckResult{} },
	},
	api.OpPause: {
		summary:  "hold new spawns and model calls; nothing is killed (ctl pause HANDLE: only that subtree's model calls)",
		flags:    noCtlFlags,
		result:   func() any { return &api.PauseResult{} },
		operands: "[HANDLE]",
		args:     ctlHandleArg,
	},
	api.OpResume: {
		summary:  "release what a pause holds (ctl resume HANDLE: what a pause of HANDLE holds)",
		flags:    noCtlFlags,
		result:   func() any { return &api.PauseResult{} },
		operands: "[HANDLE]",
		args:     ctlHandleArg,
	},
	api.OpCancel: {
		summary: "cancel one subtree (--handle TASK_ID) or every tree (--handle 0, the default); the service keeps running",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			handle := f.String("handle", api.CancelAll, "the task id of the subtree's root; 0 for every tree")
			reason := f.String("reason", "", "why, for the logs and the task")
			return func(set map[string]bool) map[string]any {
				p := map[string]any{"handle": *handle}
				if *reason != "" {
					p["reason"] = *reason
				}
				return p
			}
		},
		result: func() any { return &api.CancelResult{} },
	},
	api.OpTree: {
		summary: "show the live subagent tree",
		flags:   noCtlFlags,
		result:  func() any { return &api.TreeResult{} },
	},
	api.OpCaps: {
		summary: "show the spawn caps and the admission bounds, or set some within their bounds",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			ints := map[string]*int{}
			for _, n := range []string{"max-depth", "max-children", "max-total-subagents", "max-inflight", "spawn-burst"} {
				ints[n] = f.Int(n, 0, "set "+strings.ReplaceAll(n, "-", "_"))
			}
			for _, n := range []string{"max-live-runs", "max-live-subagents", "queue-capacity"} {
				ints[n] = f.Int(n, 0, "set "+strings.ReplaceAll(n, "-", "_")+" (the service's admission bound; at most its ceiling)")
			}
			rate := f.Float64("spawn-rate", 0, "set spawn_rate (spawns per second per tree)")
			ceiling := f.Int64("tree-token-ceiling", 0, "set tree_token_ceiling")
			return func(set map[string]bool) map[string]any {
				p := map[string]any{}
				for n, v := range ints {
					if set[n] {
						p[strings.ReplaceAll(n, "-", "_")] = *v
					}
				}
				if set["spawn-rate"] {
					p["spawn_rate"] = *rate
				}
				if set["tree-token-ceiling"] {
					p["tree_token_ceiling"] = *ceiling
				}
				if len(p) == 0 {
					return nil
				}
				return p
			}
		},
		result: func() any { return &api.CapsResult{} },
	},
	api.OpCloseBreaker: {
		summary: "close a restart breaker (--key, as a2a.Tree lists them; default the warm pool's), so its session or the warm pool starts again at once",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			key := f.String("key", "warm-pool", "the breaker's key, such as warm-pool or trigger:loop")
			return func(map[string]bool) map[string]any { return map[string]any{"key": *key} }
		},
		result: func() any { return &api.CloseBreakerResult{} },
	},
	api.OpAudit: {
		summary: "list the audit trail of operator actions, newest first (--before NEXT for the next page)",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			limit := f.Int("limit", 0, fmt.Sprintf("records per page, at most %d (default %d)", api.MaxAuditLimit, api.DefaultAuditLimit))
			before := f.String("before", "", "the next cursor a page printed: the records older than that page")
			method := f.String("method", "", "only this method's records (exactly, such as a2a.Cancel)")
			caller := f.String("caller", "", "only this caller's records (exactly: a SPIFFE ID, token:NAME or anonymous)")
			return func(set map[string]bool) map[string]any {
				p := map[string]any{}
				if set["limit"] {
					p["limit"] = *limit
				}
				for n, v := range map[string]string{"before": *before, "method": *method, "caller": *caller} {
					if v != "" {
						p[n] = v
					}
				}
				if len(p) == 0 {
					return nil
				}
				return p
			}
		},
		result: func() any { return &api.AuditResult{} },
	},
	api.OpQuestions: {
		summary: "list the questions and approvals tasks wait on, the longest waiting first (also: agentd ctl questions)",
		flags: func(f *cli.Flags) func(map[string]bool) map[string]any {
			task := f.String("task", "", "only this task's question")
			return func(map[string]bool) map[string]any {
				if *task == "" {
					return nil
				}
				return map[string]any{"task_id": *task}
			}
		},
		result: func() any { return &api.QuestionsResult{} },
	},
	api.OpAnswer: {
		summary:  "answer the question task TASK waits on with TEXT, on its caller's behalf (also: agentd ctl answer TASK TEXT; approve TASK; deny TASK [REASON])",
		flags:    noCtlFlags,
		result:   func() any { return &api.AnswerResult{} },
		operands: "TASK TEXT",
		args: func(ops []string, _ map[string]any) (map[string]any, error) {
			if len(ops) < 2 {
				return nil, cli.UsageError("ctl a2a.Answer needs the TASK and the answer's TEXT (got %d arguments)", len(ops))
			}
			return map[string]any{"task_id": ops[0], "answer": strings.Join(ops[1:], " ")}, nil
		},
	},
}

// ctlAliases are the words that decide an approval: a2a.Answer with the
// answer the approval gate reads ("yes" runs the call; anything else
// refuses it, and the model sees it).
var ctlAliases = map[string]ctlMethod{
	"approve": {
		summary:  "approve the tool call task TASK waits on (a2a.Answer TASK yes)",
		flags:    noCtlFlags,
		result:   func() any { return &api.AnswerResult{} },
		operands: "TASK",
		args: func(ops []string, _ map[string]any) (map[string]any, error) {
			if len(ops) != 1 {
				return nil, cli.UsageError("ctl approve needs the TASK alone (got %d arguments)", len(ops))
			}
			return map[string]any{"task_id": ops[0], "answer": "yes"}, nil
		},
	},
	"deny": {
		summary:  "refuse the tool call task TASK waits on (a2a.Answer TASK \"no: REASON\"; the model sees it)",
		flags:    noCtlFlags,
		result:   func() any { return &api.AnswerResult{} },
		operands: "TASK [REASON]",
		args: func(ops []string, _ map[string]any) (map[string]any, error) {
			if len(ops) < 1 {
				return nil, cli.UsageError("ctl deny needs the TASK, and may give a REASON")
			}
			answer := "no"
			if reason := strings.TrimSpace(strings.Join(ops[1:], " ")); reason != "" {
				answer += ": " + reason
			}
			return map[string]any{"task_id": ops[0], "answer": answer}, nil
		},
	},
}

func init() {
	ctlMethods[api.OpSteer] = ctlMethod{
		summary:  "ctl steer HANDLE TEXT: send a running subagent a message that joins its conversation before its next model call",
		flags:    noCtlFlags,
		result:   func() any { return &api.SteerResult{} },
		operands: "HANDLE TEXT",
		args: func(args []string, _ map[string]any) (map[string]any, error) {
			if len(args) != 2 {
				return nil, cli.UsageError("ctl %s takes HANDLE and TEXT (got %d arguments)", api.OpSteer, len(args))
			}
			return map[string]any{"handle": args[0], "text": args[1]}, nil
		},
	}
}

// ctlHandleArg takes an optional HANDLE (ctl pause HANDLE).
func ctlHandleArg(args []string, p map[string]any) (map[string]any, error) {
	if len(args) > 1 {
		return nil, cli.UsageError("takes at most one HANDLE (got %q)", args)
	}
	if len(args) == 1 {
		return map[string]any{"handle": args[0]}, nil
	}
	return p, nil
}

func noCtlFlags(*cli.Flags) func(map[string]bool) map[string]any {
	return func(map[string]bool) map[string]any { return nil }
}

// ctlMethodName accepts a2a.Tree, Tree or tree.
func ctlMethodName(s string) (string, bool) {
	for _, m := range api.OperatorMethods {
		if strings.EqualFold(s, m) || strings.EqualFold(s, strings.TrimPrefix(m, "a2a.")) {
			return m, true
		}
	}
	return "", false
}

func ctlUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: agentd ctl METHOD --to URL [method flags] [credentials] [--json]\n\nCalls an a2a.* operator method (the caller needs the operator role) and prints the result.\n\nMethods:")
	for _, m := range api.OperatorMethods {
		fmt.Fprintf(w, "  %-17s %s\n", m, ctlMethods[m].summary)
	}
	for _, a := range []string{"approve", "deny"} {
		fmt.Fprintf(w, "  %-17s %s\n", a, ctlAliases[a].summary)
	}
	fmt.Fprintln(w, "\nRun \"agentd ctl METHOD -h\" for a method's flags.")
}

// ctlConfig is `agentd ctl METHOD`.
type ctlConfig struct {
	Method string
	JSON   bool
	// Watch (a2a.Tree only) redraws the tree from the console's stream as it
	// changes, until interrupted.
	Watch  bool
	Params map[string]any // the method's params from its flags; nil for none
	Client clientConfig
}

// parseCtl parses `ctl METHOD [flags]`; help is cli.ExitWith(0).
func parseCtl(args []string, stdout, stderr io.Writer) (*ctlConfig, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == "help" {
		if len(args) > 0 && cli.IsHelp(args[0]) {
			ctlUsage(stdout)
			return nil, cli.ExitWith(0)
		}
		ctlUsage(stderr)
		return nil, cli.UsageError("ctl needs a METHOD first")
	}
	method, ok := ctlMethodName(args[0])
	m := ctlMethods[method]
	if a, alias := ctlAliases[strings.ToLower(args[0])]; alias {
		method, m, ok = strings.ToLower(args[0]), a, true
	}
	if !ok {
		msg := fmt.Sprintf("ctl: unknown method %q", args[0])
		if near := cli.ClosestWord(strings.ToLower(args[0]), api.OperatorMethods, strings.ToLower); near != "" {
			msg += fmt.Sprintf("\ndid you mean %s?", near)
		}
		return nil, cli.UsageError("%s\nrun 'agentd ctl -h' for the methods", msg)
	}
	c := &ctlConfig{Method: method}
	if _, alias := ctlAliases[method]; alias {
		c.Method = api.OpAnswer
	}
	f := cli.NewFlags("ctl "+method, stderr, m.summary)
	f.Operands = m.operands
	addClientFlags(f, &c.Client, "AGENT_CTL_TO", "base URL of the agentd service", 30*time.Second)
	f.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	if method == api.OpTree {
		f.BoolVar(&c.Watch, "watch", false, "redraw the tree as it changes (from the stream at /ui/events) until interrupted; on a terminal the screen is cleared and redrawn, otherwise each snapshot is printed once; --timeout applies only when given")
	}
	params := m.flags(f)
	// The operands (m.args), with the flags before, between or after them:
	// after the first operand a word is a flag only when it names one, so
	// an answer such as "-5" stays an operand.
	var pos []string
	for rest := args[1:]; ; {
		if err := f.Parse(rest); err != nil {
			return nil, err
		}
		rest = f.Args()
		if len(rest) == 0 || m.args == nil {
			break
		}
		for len(rest) > 0 && !namesFlag(f, rest[0]) {
			pos = append(pos, rest[0])
			rest = rest[1:]
		}
		if len(rest) == 0 {
			break
		}
	}
	if f.NArg() > 0 && m.args == nil {
		return nil, cli.UsageError("ctl %s takes no arguments (got %q)", method, f.Args())
	}
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	c.Params = params(set)
	if m.args != nil {
		p, err := m.args(pos, c.Params)
		if err != nil {
			return nil, err
		}
		c.Params = p
	}
	if c.Watch && !set["timeout"] {
		c.Client.Timeout, c.Client.Unbounded = 0, true
	}
	return c, nil
}

// Validate checks every setting and names the bad one. It reads no file.
func (c *ctlConfig) Validate() error {
	if c.Watch && c.JSON {
		return errors.New("--watch and --json: choose one (the stream at /ui/events is JSON already)")
	}
	return c.Client.validate()
}

// Ctl is `agentd ctl METHOD`.
func Ctl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseCtl(args, stdout, stderr))
	if err != nil {
		return err
	}
	ctx, hc, done, err := c.Client.dial(ctx, stderr)
	defer done()
	if err != nil {
		return err
	}
	if c.Watch {
		return watchTree(ctx, hc, c.Client.To, stdout, stderr)
	}
	raw, err := callOperator(ctx, hc, c.Client.To, c.Method, c.Params)
	if err != nil {
		return err
	}
	if c.JSON {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("%s: result is not JSON: %w", c.Method, err)
		}
		buf.WriteByte('\n')
		_, err := stdout.Write(buf.Bytes())
		return err
	}
	res := ctlMethods[c.Method].result()
	if err := json.Unmarshal(raw, res); err != nil {
		return fmt.Errorf("%s: unexpected result %s: %w", c.Method, raw, err)
	}
	switch r := res.(type) {
	case *api.TreeResult:
		printTree(stdout, r, time.Now())
	case *api.CapsResult:
		adm := r.Admission
		r.Admission = nil
		printFields(stdout, r)
		printAdmission(stdout, adm)
	case *api.AuditResult:
		printAudit(stdout, r)
	case *api.QuestionsResult:
		printQuestions(stdout, r, time.Now())
	case *api.CloseBreakerResult:
		fmt.Fprintf(stdout, "key: %s\nknown: %v\nwas_open: %v\nwas: %s\n", r.Key, r.Known, r.WasOpen, r.Was)
		printBreakers(stdout, []api.Breaker{r.Breaker}, time.Now())
	default:
		printFields(stdout, res)
	}
	return nil
}

// callOperator makes one JSON-RPC call and returns its result; a JSON-RPC or
// HTTP error is an error.
func callOperator(ctx context.Context, hc *http.Client, url, method string, params map[string]any) (json.RawMessage, error) {
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method}
	if params != nil {
		req["params"] = params
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, cli.UsageError("--to %q: %v", url, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: read the response: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var rr struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &rr); err != nil {
		return nil, fmt.Errorf("%s: not a JSON-RPC response: %w", method, err)
	}
	if rr.Error != nil {
		msg := rr.Error.Message
		if d, ok := rr.Error.Data["detail"]; ok {
			msg += ": " + fmt.Sprint(d)
		}
		return nil, fmt.Errorf("%s: error %d: %s", method, rr.Error.Code, msg)
	}
	return rr.Result, nil
}

// printFields prints a result struct as "name: value" lines, in field order;
// a nil pointer (a part printed apart, or absent) has no line.
func printFields(w io.Writer, v any) {
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if f := rv.Field(i); f.Kind() == reflect.Pointer && f.IsNil() {
			continue
		}
		val := rv.Field(i).Interface()
		if t, ok := val.(time.Time); ok {
			val = t.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(w, "%s: %v\n", name, val)
	}
}

// printTree prints the forest as an indented tree, one subagent per line.
func printTree(w io.Writer, t *api.TreeResult, now time.Time) {
	state := "running"
	if t.Paused {
		state = "paused"
	}
	if t.Draining {
		state += ", draining"
	}
	fmt.Fprintf(w, "%d live subagents (%s)\n", len(t.Nodes), state)
	defer printIntelligenceBreakers(w, t.IntelligenceBreakers, now)
	defer printBreakers(w, t.Breakers, now)
	defer printAdmission(w, t.Admission)
	depthOf := map[string]int{}
	for _, n := range t.Nodes {
		level := 0
		if d, ok := depthOf[n.ParentTaskID]; ok {
			level = d + 1
		}
		depthOf[n.TaskID] = level
		prefix := strings.Repeat("   ", level)
		if level > 0 {
			prefix = strings.Repeat("   ", level-1) + "└─ "
		}
		left := n.Deadline.Sub(now).Round(time.Second)
		pid := "-"
		if n.PID > 0 {
			pid = fmt.Sprint(n.PID)
		}
		if n.Kind == "exec" {
			fmt.Fprintf(w, "%s%s  %s  [%s]  pid %s  exec  deadline in %s\n", prefix, n.AgentPath, n.TaskID, n.Status, pid, left)
			printObjective(w, level, n.Objective)
			continue
		}
		tokens := fmt.Sprint(n.Usage.Tokens())
		if n.MaxTokens > 0 {
			tokens += fmt.Sprintf(" of %d", n.MaxTokens)
		}
		detect := ""
		if n.Health != "" {
			detect = "  " + n.Health
			if n.LastProgress != nil {
				detect += fmt.Sprintf(" (last event %s ago)", now.Sub(*n.LastProgress).Round(time.Second))
			}
			if n.MissedPings > 0 {
				detect += fmt.Sprintf(", %d pings unanswered", n.MissedPings)
			}
		}
		fmt.Fprintf(w, "%s%s  %s  [%s]  pid %s  depth %d  steps %d  tokens %s  deadline in %s  via %s%s\n",
			prefix, n.AgentPath, n.TaskID, n.Status, pid, n.Depth, n.Usage.Steps, tokens, left, n.Provider, detect)
		printObjective(w, level, n.Objective)
	}
}

// maxObjectiveLine is how many characters of a node's objective the tree
// shows.
const maxObjectiveLine = 96

// printObjective prints a node's objective under its line, indented to its
// level, on one line cut to maxObjectiveLine characters; nothing when it is
// empty.
func printObjective(w io.Writer, level int, objective string) {
	if o := oneLine(objective, maxObjectiveLine); o != "" {
		fmt.Fprintf(w, "%s   objective: %s\n", strings.Repeat("   ", level), o)
	}
}

// printAudit prints one line per audit record, then the next page's cursor.
func printAudit(w io.Writer, r *api.AuditResult) {
	if len(r.Records) == 0 {
		fmt.Fprintln(w, "no audit records")
	}
	for _, a := range r.Records {
		line := fmt.Sprintf("%s  %s  %s", a.Time.Format(time.RFC3339), oneLine(a.Caller, 200), oneLine(a.Method, 60))
		if a.Target != "" {
			line += "  target " + oneLine(a.Target, 80)
		}
		line += "  " + oneLine(a.Outcome, 20)
		if a.Detail != "" {
			line += "  " + oneLine(a.Detail, 120)
		}
		if a.Instance != "" {
			line += "  on " + oneLine(a.Instance, 80)
		}
		fmt.Fprintln(w, line)
	}
	if r.Next != "" {
		fmt.Fprintf(w, "next: --before %s\n", r.Next)
	}
}

// printQuestions prints each waiting question: its task, since when, who
// asks and who is asked, then the question, its choices or the call to
// approve, and how to answer it.
func printQuestions(w io.Writer, r *api.QuestionsResult, now time.Time) {
	if len(r.Questions) == 0 {
		fmt.Fprintln(w, "no questions waiting")
		return
	}
	for _, q := range r.Questions {
		id := oneLine(q.TaskID, 80)
		line := fmt.Sprintf("%s  waiting %s (since %s)  asked by %s", id, now.Sub(q.Since).Round(time.Second), q.Since.Format(time.RFC3339), oneLine(q.AgentPath, 80))
		if q.Handle != "" {
			line += " (" + oneLine(q.Handle, 80) + ")"
		}
		line += "  of " + oneLine(q.Caller, 200)
		if q.Deadline != nil {
			line += fmt.Sprintf("  fails in %s", q.Deadline.Sub(now).Round(time.Second))
		}
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "   question: %s\n", oneLine(q.Text, 400))
		if q.Tool != "" {
			fmt.Fprintf(w, "   approval: %s %s\n", oneLine(q.Tool, 80), oneLine(string(q.Arguments), 400))
			fmt.Fprintf(w, "   decide: agentd ctl approve %s | agentd ctl deny %s [REASON]\n", id, id)
			continue
		}
		if len(q.Choices) > 0 {
			fmt.Fprintf(w, "   choices: %s\n", oneLine(strings.Join(q.Choices, " | "), 400))
		}
		fmt.Fprintf(w, "   answer: agentd ctl answer %s TEXT\n", id)
	}
}

// oneLine returns s on one line (each run of white space, line breaks
// included, one space; any other control character, such as a terminal's
// escape, U+FFFD), cut to at most n characters with an ellipsis.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return utf8.RuneError
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// printAdmission prints the admission gauges on a few lines; nothing without
// admission control.
func printAdmission(w io.Writer, a *api.Admission) {
	if a == nil {
		return
	}
	fmt.Fprintf(w, "admission: runs %d/%d (ceiling %d), process slots %d/%d (ceiling %d), processes %d, queued %d/%d (ceiling %d; high %d, normal %d, low %d)\n",
		a.Runs, a.MaxRuns, a.Ceiling.MaxRuns, a.Slots, a.MaxLiveSubagents, a.Ceiling.MaxLiveSubagents, a.LiveProcesses,
		a.Queued, a.QueueCapacity, a.Ceiling.QueueCapacity, a.QueuedByPriority["high"], a.QueuedByPriority["normal"], a.QueuedByPriority["low"])
	fmt.Fprintf(w, "admission: %d callers, %d admitted, %d left the queue unrun, %d nested spawns refused, shed %d queue_full %d caller_queue_full %d closed %d memory, retry after %ds\n",
		a.Callers, a.Admitted, a.Cancelled, a.Refused, a.Shed["queue_full"], a.Shed["caller_queue_full"], a.Shed["closed"], a.Shed["memory"], a.RetryAfterSeconds)
}

// printBreakers prints one line per restart breaker.
func printBreakers(w io.Writer, bs []api.Breaker, now time.Time) {
	for _, b := range bs {
		line := fmt.Sprintf("breaker %s: %s", b.Key, b.State)
		if b.Since != nil {
			line += fmt.Sprintf(" since %s", b.Since.Format(time.RFC3339))
		}
		if b.NextTrial != nil {
			line += fmt.Sprintf(", next trial in %s", b.NextTrial.Sub(now).Round(time.Millisecond))
		}
		if b.Trial {
			line += ", trial under way"
		}
		line += fmt.Sprintf(" (%d openings, %d failures in the window, last %s)", b.Openings, b.Failures, b.LastOutcome)
		fmt.Fprintln(w, line)
	}
}

// printIntelligenceBreakers prints one line per model endpoint's breaker.
func printIntelligenceBreakers(w io.Writer, bs []api.EndpointBreaker, now time.Time) {
	for _, b := range bs {
		line := fmt.Sprintf("intelligence %s model %s: breaker %s since %s, %d failures in a row", b.Endpoint, b.Model, b.State, b.Since.Format(time.RFC3339), b.Failures)
		if b.State == api.BreakerOpen {
			line += fmt.Sprintf(", half-opens in %s", b.Until.Sub(now).Round(time.Millisecond))
		}
		fmt.Fprintln(w, line)
	}
}

// namesFlag reports whether word is one of f's flags (-name, --name,
// -name=value); "--" ends the flags and is one too.
func namesFlag(f *cli.Flags, word string) bool {
	if word == "--" {
		return true
	}
	if !strings.HasPrefix(word, "-") {
		return false
	}
	name := strings.TrimLeft(word, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	return name != "" && f.Lookup(name) != nil
}
