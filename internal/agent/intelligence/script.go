package intelligence

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// The builtin:script=FILE intelligence: a deterministic scripted model whose
// turns come from a file, so tests and demos drive exact subagent trees. The
// format (docs/intelligence.md, "Scripted intelligence"):
//
//	# a comment line
//	window N           before any section: the model's context window, N tokens (a longer request is an error)
//	[default]          steps for every agent no other section matches
//	[depth 1]          steps for the agents at depth 1
//	[path 0.2]         steps for the agent at agent path 0.2 (beats depth, which beats default)
//
// and one step per line:
//
//	call TOOL [JSON]                                   call a tool by its wire name; args default to {}
//	spawn sync|async|detach "OBJECTIVE" [key=value]... subagent.spawn; keys: scope=S/T,S/T max_tokens=N
//	                                                   max_steps=N deadline=DUR provider=NAME format=text|markdown|json
//	                                                   type=AGENT_TYPE (a declared agent type for the child)
//	                                                   ref=LABEL=URI (a resource_ref seed slice; repeatable)
//	await                                              subagent.await every async child not yet finished; ends early
//	                                                   when a child asks a question (its report in state asking)
//	await N                                            subagent.await the Nth child spawned, finished or not
//	ask "QUESTION" [choices=A,B]                       subagent.ask: wait for the answer ({answer} afterwards)
//	reply N "TEXT"                                     subagent.answer: answer the question of the Nth child spawned
//	steer N "TEXT"                                     subagent.steer: send the Nth child spawned a steering message
//	steered "TEXT"                                     finish with TEXT once a steering message joined the conversation; until then wait turns
//	pass N                                             subagent.ask with the Nth child's handle: pass its question up
//	sleep DUR                                          wait (the run's cancellation still applies)
//	usage IN [OUT]                                     the next model call reports these tokens
//	stream DUR                                         later answers stream a word at a time, DUR apart
//	answer "TEXT"                                      finish with TEXT
//	refuse "TEXT"                                      finish refused, with TEXT
//	repeat                                             start the section again (last step only)
//
// TEXT may use {answer} (the latest answer to subagent.ask), {objective}, {path}, {depth}, {results} (finished children's
// distillates, in spawn order, one per line), {handles} (spawned handles),
// {transcript} (every tool result seen, one per line), {prompt} (the first
// user turn: the objective and the seed slices as the agent was handed them),
// {system} (the system prompt), {messages} (how many messages the model
// was sent) and {steers} (the steering messages it was sent, one per line). A compaction call (Request.Compaction) is answered with a
// summary naming the size of the turns it summarizes, and takes no step. Running out of steps
// answers "". Every tool result the script sees is logged ("script observed"),
// its text only with log content on.

// steerWait is how long a steered step thinks before each turn that waits
// for a steering message.
const steerWait = 50 * time.Millisecond

// steersOf returns the steering messages in a request's conversation, in
// order, without their api.SteerPrefix.
func steersOf(req *Request) []string {
	var out []string
	for _, msg := range req.Messages {
		if msg.Role == RoleUser && strings.HasPrefix(msg.Content, api.SteerPrefix) {
			out = append(out, strings.TrimPrefix(msg.Content, api.SteerPrefix))
		}
	}
	return out
}

// maxScriptSize bounds a script file.
const maxScriptSize = 1 << 20

type stepKind int

const (
	stepCall stepKind = iota
	stepSpawn
	stepAwait
	stepSleep
	stepUsage
	stepAnswer
	stepRefuse
	stepRepeat
	stepStream
	stepAsk
	stepReply
	stepPass
	stepSteer
	stepSteered
	stepAwaitOne
)

// step is one parsed script step.
type step struct {
	kind   stepKind
	line   int
	tool   string          // call
	args   json.RawMessage // call
	spawns []api.SpawnArgs // spawn: one from a script, several from builtin:demo
	d      time.Duration   // sleep, stream
	usage  api.Usage       // usage
	text   string          // answer, refuse, reply: a template; ask: the question
	child  int             // reply, pass, steer, await N: the child's index (0-based)
	ask    api.AskArgs     // ask
	// answerFn, when set, computes an answer from the run (builtin:demo).
	answerFn func(*scriptedModel) string
}

// turns reports whether the step makes a model turn (rather than only
// changing state before one).
func (s step) turns() bool {
	switch s.kind {
	case stepCall, stepSpawn, stepAnswer, stepRefuse, stepAsk, stepReply, stepPass, stepSteer, stepSteered, stepAwaitOne:
		return true
	}
	return false
}

type selectorKind int

const (
	selDefault selectorKind = iota
	selDepth
	selPath
)

type section struct {
	kind  selectorKind
	depth int
	path  string
	line  int
	steps []step
}

// script is a parsed builtin:script program.
type script struct {
	sections []section
	window   int64 // the declared context window; 0 for none
}

// parseScript parses a script. Every error names its line.
func parseScript(src []byte) (*script, error) {
	if len(src) > maxScriptSize {
		return nil, fmt.Errorf("script: larger than %d bytes", maxScriptSize)
	}
	sc := &script{}
	seen := map[string]int{}
	var cur *section
	br := bufio.NewReader(bytes.NewReader(src))
	for n := 1; ; n++ {
		raw, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return nil, err
		}
		line := strings.TrimSpace(raw)
		if line != "" && !strings.HasPrefix(line, "#") {
			if rest, ok := strings.CutPrefix(line, "window "); ok && cur == nil {
				w, perr := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
				if perr != nil || w <= 0 || sc.window != 0 {
					return nil, fmt.Errorf("script line %d: window: want one positive token count, before any section", n)
				}
				sc.window = w
			} else if strings.HasPrefix(line, "[") {
				sec, key, perr := parseHeader(line, n)
				if perr != nil {
					return nil, perr
				}
				if prev, dup := seen[key]; dup {
					return nil, fmt.Errorf("script line %d: section %s already defined on line %d", n, line, prev)
				}
				seen[key] = n
				if cur != nil {
					if err := checkSection(cur); err != nil {
						return nil, err
					}
				}
				sc.sections = append(sc.sections, sec)
				cur = &sc.sections[len(sc.sections)-1]
			} else {
				if cur == nil {
					return nil, fmt.Errorf("script line %d: a step before any [section]", n)
				}
				st, perr := parseStep(line, n)
				if perr != nil {
					return nil, perr
				}
				if k := len(cur.steps); k > 0 {
					switch prev := cur.steps[k-1]; prev.kind {
					case stepAnswer, stepRefuse, stepRepeat:
						return nil, fmt.Errorf("script line %d: never reached after the step on line %d", n, prev.line)
					}
				}
				cur.steps = append(cur.steps, st)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if cur != nil {
		if err := checkSection(cur); err != nil {
			return nil, err
		}
	}
	if len(sc.sections) == 0 {
		return nil, errors.New("script: no [section]")
	}
	return sc, nil
}

// checkSection refuses a repeating section without a step that makes a turn:
// it would spin without ever answering its loop.
func checkSection(s *section) error {
	k := len(s.steps)
	if k == 0 || s.steps[k-1].kind != stepRepeat {
		return nil
	}
	for _, st := range s.steps {
		if st.turns() {
			return nil
		}
	}
	return fmt.Errorf("script line %d: repeat in a section with no call, spawn, answer or refuse", s.steps[k-1].line)
}

func parseHeader(line string, n int) (section, string, error) {
	if !strings.HasSuffix(line, "]") {
		return section{}, "", fmt.Errorf("script line %d: a section header is [default], [depth N] or [path P]", n)
	}
	f := strings.Fields(line[1 : len(line)-1])
	switch {
	case len(f) == 1 && f[0] == "default":
		return section{kind: selDefault, line: n}, "default", nil
	case len(f) == 2 && f[0] == "depth":
		d, err := strconv.Atoi(f[1])
		if err != nil || d < 0 {
			return section{}, "", fmt.Errorf("script line %d: depth %q: want a non-negative integer", n, f[1])
		}
		return section{kind: selDepth, depth: d, line: n}, "depth " + strconv.Itoa(d), nil
	case len(f) == 2 && f[0] == "path":
		if !validPath(f[1]) {
			return section{}, "", fmt.Errorf("script line %d: path %q: want a dotted agent path such as 0.2.1", n, f[1])
		}
		return section{kind: selPath, path: f[1], line: n}, "path " + f[1], nil
	}
	return section{}, "", fmt.Errorf("script line %d: a section header is [default], [depth N] or [path P]", n)
}

func validPath(p string) bool {
	for _, part := range strings.Split(p, ".") {
		if _, err := strconv.ParseUint(part, 10, 32); err != nil {
			return false
		}
	}
	return true
}

// tokens splits a step line into words and Go-quoted strings.
func tokens(line string) ([]string, error) {
	var out []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return out, nil
		}
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("unterminated or bad quoted string")
			}
			s, err := strconv.Unquote(q)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			line = line[len(q):]
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		out = append(out, line[:i])
		line = line[i:]
	}
}

func parseStep(line string, n int) (step, error) {
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	st := step{line: n}
	fail := func(format string, a ...any) (step, error) {
		return step{}, fmt.Errorf("script line %d: %s: %s", n, verb, fmt.Sprintf(format, a...))
	}
	switch verb {
	case "call":
		st.kind = stepCall
		tool, args, _ := strings.Cut(rest, " ")
		args = strings.TrimSpace(args)
		if tool == "" {
			return fail("want a tool name")
		}
		if args == "" {
			args = "{}"
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
			return fail("the arguments must be one JSON object")
		}
		st.tool, st.args = tool, json.RawMessage(args)
	case "spawn":
		st.kind = stepSpawn
		toks, err := tokens(rest)
		if err != nil {
			return fail("%v", err)
		}
		if len(toks) < 2 {
			return fail("want a disposition and an objective")
		}
		a := api.SpawnArgs{Disposition: api.Disposition(toks[0])}
		if _, err := a.Disposition.Normalize(); err != nil || toks[0] == "" {
			return fail("disposition %q: want sync, async or detach", toks[0])
		}
		a.Contract.Objective = toks[1]
		for _, kv := range toks[2:] {
			if err := spawnOption(&a, kv); err != nil {
				return fail("%v", err)
			}
		}
		st.spawns = []api.SpawnArgs{a}
	case "await", "repeat":
		if verb == "await" && rest != "" {
			i, err := strconv.Atoi(rest)
			if err != nil || i < 1 {
				return fail("child %q: want a number from 1, or nothing", rest)
			}
			st.kind, st.child = stepAwaitOne, i-1
			break
		}
		if rest != "" {
			return fail("takes no arguments")
		}
		st.kind = map[string]stepKind{"await": stepAwait, "repeat": stepRepeat}[verb]
	case "sleep", "stream":
		st.kind = stepSleep
		if verb == "stream" {
			st.kind = stepStream
		}
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 || d > api.MaxDeadline {
			return fail("want a duration such as 250ms")
		}
		st.d = d
	case "usage":
		st.kind = stepUsage
		f := strings.Fields(rest)
		if len(f) < 1 || len(f) > 2 {
			return fail("want IN [OUT] token counts")
		}
		var v [2]int64
		for i, s := range f {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil || x < 0 || x > 1<<40 {
				return fail("token count %q: want a non-negative integer", s)
			}
			v[i] = x
		}
		st.usage = api.Usage{TokensIn: v[0], TokensOut: v[1]}
	case "answer", "refuse":
		st.kind = stepAnswer
		if verb == "refuse" {
			st.kind = stepRefuse
		}
		toks, err := tokens(rest)
		if err != nil {
			return fail("%v", err)
		}
		switch len(toks) {
		case 0:
		case 1:
			st.text = toks[0]
		default:
			return fail("quote the text")
		}
	case "ask":
		st.kind = stepAsk
		toks, err := tokens(rest)
		if err != nil {
			return fail("%v", err)
		}
		if len(toks) < 1 || len(toks) > 2 {
			return fail("want a quoted question and, optionally, choices=A,B")
		}
		st.ask.Question = toks[0]
		if len(toks) == 2 {
			c, ok := strings.CutPrefix(toks[1], "choices=")
			if !ok || c == "" {
				return fail("want choices=A,B, got %q", toks[1])
			}
			st.ask.Choices = strings.Split(c, ",")
		}
		if err := st.ask.Validate(); err != nil {
			return fail("%v", err)
		}
	case "steered":
		st.kind = stepSteered
		toks, err := tokens(rest)
		if err != nil {
			return fail("%v", err)
		}
		if len(toks) != 1 {
			return fail("want a quoted text")
		}
		st.text = toks[0]
	case "reply", "pass", "steer":
		st.kind = stepReply
		switch verb {
		case "pass":
			st.kind = stepPass
		case "steer":
			st.kind = stepSteer
		}
		toks, err := tokens(rest)
		if err != nil {
			return fail("%v", err)
		}
		want := 2
		if verb == "pass" {
			want = 1
		}
		if len(toks) != want {
			return fail("want the child's number (1 for the first spawned)%s", map[bool]string{true: " and a quoted text", false: ""}[verb != "pass"])
		}
		i, err := strconv.Atoi(toks[0])
		if err != nil || i < 1 {
			return fail("child %q: want a number from 1", toks[0])
		}
		st.child = i - 1
		if verb != "pass" {
			st.text = toks[1]
		}
	default:
		return step{}, fmt.Errorf("script line %d: unknown step %q (want call, spawn, await, ask, reply, pass, steer, steered, sleep, stream, usage, answer, refuse or repeat)", n, verb)
	}
	return st, nil
}

func spawnOption(a *api.SpawnArgs, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || v == "" {
		return fmt.Errorf("option %q: want key=value", kv)
	}
	num := func() (int64, error) {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil || x <= 0 {
			return 0, fmt.Errorf("%s=%q: want a positive integer", k, v)
		}
		return x, nil
	}
	switch k {
	case "scope":
		for _, t := range strings.Split(v, ",") {
			ref, ok := api.ParseToolRef(t)
			if !ok {
				return fmt.Errorf("scope: %q is not SERVER/TOOL", t)
			}
			a.Scope.Allow = append(a.Scope.Allow, ref)
		}
	case "max_tokens":
		x, err := num()
		if err != nil {
			return err
		}
		a.Limits.MaxTokens = x
	case "max_steps":
		x, err := num()
		if err != nil || x > 1<<20 {
			return fmt.Errorf("max_steps=%q: want a positive integer", v)
		}
		a.Limits.MaxSteps = int(x)
	case "deadline":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > api.MaxDeadline {
			return fmt.Errorf("deadline=%q: want a positive duration", v)
		}
		a.Limits.Deadline = api.Duration(d)
	case "provider":
		a.Provider = v
	case "type":
		a.AgentType = v
	case "ref":
		label, uri, ok := strings.Cut(v, "=")
		if !ok || label == "" || uri == "" {
			return fmt.Errorf("ref=%q: want ref=LABEL=URI", v)
		}
		a.Seed.Slices = append(a.Seed.Slices, api.SeedSlice{Label: label, Content: api.SeedContent{ResourceRef: uri}})
	case "format":
		a.Contract.OutputFormat.Kind = v
		if err := a.Contract.OutputFormat.Validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown option %q", k)
	}
	return nil
}

// loadScript reads and parses a script file.
func loadScript(path string) (*script, error) {
	if path == "" {
		return nil, errors.New("agent: builtin:script needs a file: builtin:script=FILE")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agent: builtin:script: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxScriptSize+1))
	if err != nil {
		return nil, fmt.Errorf("agent: builtin:script: %w", err)
	}
	sc, err := parseScript(b)
	if err != nil {
		return nil, fmt.Errorf("agent: builtin:script %s: %w", path, err)
	}
	return sc, nil
}

// steps returns the section for an agent: its path, else its depth, else
// default.
func (sc *script) steps(path string, depth int) ([]step, bool) {
	var byDepth, byDefault *section
	for i := range sc.sections {
		s := &sc.sections[i]
		switch {
		case s.kind == selPath && s.path == path:
			return s.steps, true
		case s.kind == selDepth && s.depth == depth && byDepth == nil:
			byDepth = s
		case s.kind == selDefault:
			byDefault = s
		}
	}
	if byDepth != nil {
		return byDepth.steps, true
	}
	if byDefault != nil {
		return byDefault.steps, true
	}
	return nil, false
}

// scriptedModel runs a script for one agent. It keeps the run's state between
// model calls, so it serves one loop (which is all a subagent runs).
type scriptedModel struct {
	sc   *script
	plan func(req *Request) []step // builds the steps instead of sc (builtin:demo)
	log  *slog.Logger
	// content: the tool results it sees may be logged (telemetry.log_content).
	content bool
	// waits counts the turns a steered step has waited (script.go).
	waits int

	started    bool
	steps      []step
	pc         int
	next       int // tool call ids
	pending    map[string]pendingCall
	usage      *api.Usage    // from a usage step, for the next call
	pace       time.Duration // from a stream step: between the words of an answer streamed
	children   []scriptChild
	transcript []string
	answer     string // the latest answer to subagent.ask
	req        *Request
	replaying  bool // replay: earlier turns played again, without waits
}

type pendingCall struct {
	tool  string
	child int // spawn: index into children; -1 otherwise
}

// scriptChild is one spawn the script made, in order.
type scriptChild struct {
	objective string
	handle    string
	refusal   string
	report    *api.ChildReport // once finished
	asking    bool             // its latest report was in state asking, not yet replied to or passed up
}

// SetLogger gives the script its logger; content says whether the tool
// results it sees may be logged.
func (m *scriptedModel) SetLogger(l *slog.Logger, content bool) { m.log, m.content = l, content }

// ContextWindow is the script's declared window (Windowed); 0 for none.
func (m *scriptedModel) ContextWindow() int64 {
	if m.sc == nil {
		return 0
	}
	return m.sc.window
}

// summarize answers a compaction call: a deterministic summary that names
// the size of what it stands for, with the estimated usage.
func (m *scriptedModel) summarize(req *Request) *Response {
	var n int
	for _, msg := range req.Messages {
		n += len(msg.Content)
	}
	text := fmt.Sprintf("summary of the earlier turns (%d characters)", n)
	return &Response{Content: text, Finish: FinishStop, Usage: usageOf(req, text)}
}

// Complete plays the script: it reads the tool results that arrived since the
// last call, runs the steps that need no turn (sleep, usage), and returns the
// next turn.
func (m *scriptedModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if w := m.ContextWindow(); w > 0 {
		// As a real model would: a request over the window is an error.
		if n := requestTokens(req); n > w {
			return nil, fmt.Errorf("agent: builtin:script: the request of about %d tokens exceeds the context window of %d tokens", n, w)
		}
	}
	if req.Compaction {
		return m.summarize(req), nil
	}
	if !m.started {
		m.started = true
		m.pending = make(map[string]pendingCall)
		if m.plan != nil {
			m.steps = m.plan(req)
		} else {
			steps, ok := m.sc.steps(req.AgentPath, req.Depth)
			if !ok {
				return nil, fmt.Errorf("agent: builtin:script has no section for agent %s (depth %d)", req.AgentPath, req.Depth)
			}
			m.steps = steps
		}
		if err := m.replay(ctx, req); err != nil {
			return nil, err
		}
	}
	return m.play(ctx, req)
}

// replay brings a script started on a conversation that already has turns
// (a subagent resumed from its stored conversation) to where it was: it
// plays each earlier turn again on the conversation before it, without its
// sleeps or streaming, so its step, its call ids, its children and the
// answers it saw are those of the run that made the turns. A script is
// deterministic, so the turns it plays are the ones in the conversation.
func (m *scriptedModel) replay(ctx context.Context, req *Request) error {
	m.replaying = true
	defer func() { m.replaying = false }()
	for i, msg := range req.Messages {
		if msg.Role != RoleAssistant {
			continue
		}
		sub := *req
		sub.Messages, sub.OnText = req.Messages[:i], nil
		if _, err := m.play(ctx, &sub); err != nil {
			return fmt.Errorf("agent: builtin:script: replaying the stored conversation: %w", err)
		}
	}
	return nil
}

// play reads the tool results that arrived since the last call and plays
// the script's next turn.
func (m *scriptedModel) play(ctx context.Context, req *Request) (*Response, error) {
	m.req = req
	m.observe(req)
	for {
		if m.pc >= len(m.steps) {
			return m.respond(req, &Response{Finish: FinishStop}), nil
		}
		st := m.steps[m.pc]
		switch st.kind {
		case stepSleep:
			if m.replaying {
				m.pc++
				continue
			}
			t := time.NewTimer(st.d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, context.Cause(ctx)
			}
			m.pc++
		case stepStream:
			m.pace = st.d
			m.pc++
		case stepUsage:
			u := st.usage
			m.usage = &u
			m.pc++
		case stepRepeat:
			m.pc = 0
		case stepCall:
			m.pc++
			return m.respond(req, &Response{ToolCalls: []ToolCall{m.call(req, st.tool, st.args, -1)}, Finish: FinishToolCalls}), nil
		case stepSpawn:
			m.pc++
			var calls []ToolCall
			for _, a := range st.spawns {
				b, err := json.Marshal(a)
				if err != nil {
					return nil, fmt.Errorf("agent: builtin:script line %d: %w", st.line, err)
				}
				m.children = append(m.children, scriptChild{objective: a.Contract.Objective})
				calls = append(calls, m.call(req, api.ToolSpawn, b, len(m.children)-1))
			}
			return m.respond(req, &Response{ToolCalls: calls, Finish: FinishToolCalls}), nil
		case stepAwait:
			if slices.ContainsFunc(m.children, func(c scriptChild) bool { return c.asking }) {
				m.pc++ // a child asks: the next steps reply to it or pass it up
				continue
			}
			var calls []ToolCall
			for _, c := range m.children {
				if c.handle != "" && c.report == nil {
					b, _ := json.Marshal(api.AwaitArgs{Handle: c.handle})
					calls = append(calls, m.call(req, api.ToolAwait, b, -1))
				}
			}
			if len(calls) == 0 {
				m.pc++
				continue
			}
			// The step stays current until every child has finished.
			return m.respond(req, &Response{ToolCalls: calls, Finish: FinishToolCalls}), nil
		case stepAwaitOne:
			m.pc++
			if st.child >= len(m.children) || m.children[st.child].handle == "" {
				return nil, fmt.Errorf("agent: builtin:script line %d: no child %d spawned", st.line, st.child+1)
			}
			b, _ := json.Marshal(api.AwaitArgs{Handle: m.children[st.child].handle})
			return m.respond(req, &Response{ToolCalls: []ToolCall{m.call(req, api.ToolAwait, b, -1)}, Finish: FinishToolCalls}), nil
		case stepAsk:
			m.pc++
			b, _ := json.Marshal(st.ask)
			return m.respond(req, &Response{ToolCalls: []ToolCall{m.call(req, api.ToolAsk, b, -1)}, Finish: FinishToolCalls}), nil
		case stepReply, stepPass:
			m.pc++
			if st.child >= len(m.children) || m.children[st.child].handle == "" {
				return nil, fmt.Errorf("agent: builtin:script line %d: no child %d spawned", st.line, st.child+1)
			}
			c := &m.children[st.child]
			c.asking = false
			var b []byte
			wire := api.ToolAnswer
			if st.kind == stepReply {
				b, _ = json.Marshal(api.AnswerArgs{Handle: c.handle, Answer: m.expand(st.text)})
			} else {
				wire = api.ToolAsk
				b, _ = json.Marshal(api.AskArgs{Handle: c.handle})
			}
			return m.respond(req, &Response{ToolCalls: []ToolCall{m.call(req, wire, b, -1)}, Finish: FinishToolCalls}), nil
		case stepSteer:
			m.pc++
			if st.child >= len(m.children) || m.children[st.child].handle == "" {
				return nil, fmt.Errorf("agent: builtin:script line %d: no child %d spawned", st.line, st.child+1)
			}
			b, _ := json.Marshal(api.SteerArgs{Handle: m.children[st.child].handle, Message: m.expand(st.text)})
			return m.respond(req, &Response{ToolCalls: []ToolCall{m.call(req, api.ToolSteer, b, -1)}, Finish: FinishToolCalls}), nil
		case stepSteered:
			if len(steersOf(req)) > 0 {
				m.pc++
				text := m.expand(st.text)
				return m.respond(req, &Response{Content: text, Finish: FinishStop}), nil
			}
			// Not steered yet: a model's think, then a turn that changes
			// nothing (a status call naming no child, a new name each
			// time so that it is never a repeated call).
			t := time.NewTimer(steerWait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, context.Cause(ctx)
			}
			m.waits++
			b, _ := json.Marshal(api.HandleArgs{Handle: "steer-wait-" + strconv.Itoa(m.waits)})
			return m.respond(req, &Response{ToolCalls: []ToolCall{m.call(req, api.ToolStatus, b, -1)}, Finish: FinishToolCalls}), nil
		case stepAnswer:
			text := m.expand(st.text)
			if st.answerFn != nil {
				text = st.answerFn(m)
			}
			if err := m.stream(ctx, req, text); err != nil {
				return nil, err
			}
			return m.respond(req, &Response{Content: text, Finish: FinishStop}), nil
		case stepRefuse:
			text := m.expand(st.text)
			return m.respond(req, &Response{Content: text, Refusal: text, Finish: FinishRefusal}), nil
		}
	}
}

// stream hands an answer's text to req.OnText (when set) a word at a time,
// each word with the spaces after it, m.pace apart; the wait ends early when
// ctx does.
func (m *scriptedModel) stream(ctx context.Context, req *Request, text string) error {
	if req.OnText == nil {
		return nil
	}
	for i, w := range words(text) {
		if i > 0 && m.pace > 0 {
			t := time.NewTimer(m.pace)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return context.Cause(ctx)
			}
		}
		req.OnText(w)
	}
	return nil
}

// words splits s after each run of white space: the pieces joined are s.
func words(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if (s[i] == ' ' || s[i] == '\n') && (i+1 == len(s) || (s[i+1] != ' ' && s[i+1] != '\n')) {
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// call makes one tool call of a turn, named as the model is offered it.
func (m *scriptedModel) call(req *Request, wire string, args json.RawMessage, child int) ToolCall {
	m.next++
	id := "call_" + strconv.Itoa(m.next)
	m.pending[id] = pendingCall{tool: wire, child: child}
	// A tool the model was not offered is called by its wire name, which the
	// loop passes through as is: the supervisor refuses it, as it would refuse
	// a name a real model made up.
	name := wire
	for _, t := range req.Tools {
		if t.Wire == wire {
			name = t.Name
			break
		}
	}
	return ToolCall{ID: id, Name: name, Args: args}
}

// respond fills in the turn's usage: the script's, or a deterministic estimate.
func (m *scriptedModel) respond(req *Request, r *Response) *Response {
	if m.usage != nil {
		r.Usage = *m.usage
		m.usage = nil
		return r
	}
	out := r.Content
	for _, c := range r.ToolCalls {
		out += c.Name + string(c.Args)
	}
	r.Usage = usageOf(req, out)
	return r
}

// observe reads the tool results added to the conversation since the last
// call and updates what the script knows about its children.
func (m *scriptedModel) observe(req *Request) {
	// Every message is read each time: compaction may have shortened the
	// conversation, and a result is taken once (pending is keyed by call).
	for _, msg := range req.Messages {
		if msg.Role != RoleTool {
			continue
		}
		pc, ok := m.pending[msg.ToolCallID]
		if !ok {
			continue
		}
		delete(m.pending, msg.ToolCallID)
		text, isErr := strings.CutPrefix(msg.Content, "ERROR: ")
		m.transcript = append(m.transcript, pc.tool+": "+text)
		if m.log != nil {
			if m.content {
				m.log.Info("script observed", "tool", pc.tool, "is_error", isErr, "text", text)
			} else {
				m.log.Info("script observed", "tool", pc.tool, "is_error", isErr)
			}
		}
		if pc.tool == api.ToolAsk && !isErr {
			m.answer = text
		}
		var rep api.ChildReport
		parsed := !isErr && json.Unmarshal([]byte(text), &rep) == nil && rep.Handle != ""
		if parsed && rep.State == api.ChildAsking {
			for i := range m.children {
				if m.children[i].handle == rep.Handle || i == pc.child {
					m.children[i].asking = true
				}
			}
		}
		switch {
		case pc.child >= 0 && !parsed:
			m.children[pc.child].refusal = text
		case pc.child >= 0:
			m.children[pc.child].handle = rep.Handle
			if rep.State == api.ChildFinished {
				m.children[pc.child].report = &rep
			}
		case parsed && rep.State == api.ChildFinished:
			for i := range m.children {
				if m.children[i].handle == rep.Handle {
					m.children[i].report = &rep
				}
			}
		}
	}
}

// expand fills a text template.
func (m *scriptedModel) expand(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	var results, handles []string
	prompt := ""
	if len(m.req.Messages) > 0 {
		prompt = m.req.Messages[0].Content
	}
	for _, c := range m.children {
		if c.handle != "" {
			handles = append(handles, c.handle)
		}
		if c.report != nil && c.report.Distillate != nil {
			results = append(results, c.report.Distillate.Text())
		}
	}
	return strings.NewReplacer(
		"{objective}", m.req.Objective,
		"{answer}", m.answer,
		"{path}", m.req.AgentPath,
		"{depth}", strconv.Itoa(m.req.Depth),
		"{results}", strings.Join(results, "\n"),
		"{handles}", strings.Join(handles, " "),
		"{transcript}", strings.Join(m.transcript, "\n"),
		"{prompt}", prompt,
		"{system}", m.req.System,
		"{messages}", strconv.Itoa(len(m.req.Messages)),
		"{steers}", strings.Join(steersOf(m.req), "\n"),
	).Replace(s)
}
