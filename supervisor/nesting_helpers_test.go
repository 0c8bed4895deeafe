package supervisor

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// The "prog" helper is a child that follows a program given as its objective
// (JSON): it makes tool calls over the control channel, in order, and answers
// with what it saw. Children it spawns run the same helper, with their own
// program as their objective, so a test builds an exact tree in one value.
func init() { helpers["prog"] = helperProg }

// prog is a helper program.
type prog struct {
	SleepMS int `json:"sleep_ms,omitempty"` // before the calls
	// WaitFile, before the calls, waits until this file exists: a gate the
	// test opens when it has seen what it needs to.
	WaitFile string     `json:"wait_file,omitempty"`
	Calls    []progCall `json:"calls,omitempty"`
	// Hold waits for ctrl/cancel after the calls instead of answering.
	Hold bool `json:"hold,omitempty"`
	// Spend, after the calls, reports Spend tokens per "model call" forever,
	// ignoring its grant: a loop/event, then a tool call whose answer it waits
	// for, as a real loop waits for its model and tools.
	Spend int64 `json:"spend,omitempty"`
	// OnCancel are calls made after ctrl/cancel arrives, before answering.
	OnCancel []progCall `json:"on_cancel,omitempty"`
	// Answer is the distillate text; default the JSON progReport.
	Answer string `json:"answer,omitempty"`
	// Blob, after the calls, is stored with blob/put before answering.
	Blob string `json:"blob,omitempty"`
	// AnswerBlob answers with a reference to the stored Blob.
	AnswerBlob bool `json:"answer_blob,omitempty"`
}

type progCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Touch, before the call, creates this file: it opens a gate another
	// child waits for (prog.WaitFile).
	Touch string `json:"touch,omitempty"`
}

// progReport is what a prog child answers by default: its minted identity and
// grant as it received them, and every tool result it got.
type progReport struct {
	AgentID   string          `json:"agent_id"`
	AgentPath string          `json:"agent_path"`
	Depth     int             `json:"depth"`
	Scope     []api.ToolRef   `json:"scope"`
	Tags      api.ToolTags    `json:"tags"`
	Tools     []string        `json:"tools"`
	Limits    api.Limits      `json:"limits"`
	Telemetry api.Telemetry   `json:"telemetry"`
	Seed      []api.SeedSlice `json:"seed,omitempty"`
	Agent     *api.AgentRole  `json:"agent,omitempty"`
	Results   []progResult    `json:"results"`
	// Endpoint and Breakers are the payload's intelligence's; Keys the
	// child's environment entries that carry intelligence keys.
	Endpoint string                `json:"endpoint,omitempty"`
	Breakers []api.EndpointBreaker `json:"breakers,omitempty"`
	Keys     []string              `json:"keys,omitempty"`
}

type progResult struct {
	Tool    string `json:"tool"`
	IsError bool   `json:"is_error"`
	Text    string `json:"text"`
}

func (p prog) objective() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// spawnCall is a subagent.spawn of a prog child.
func spawnCall(child prog, disposition api.Disposition, mutate ...func(*api.SpawnArgs)) progCall {
	a := api.SpawnArgs{Contract: api.OutputContract{Objective: child.objective()}, Disposition: disposition}
	for _, m := range mutate {
		m(&a)
	}
	b, _ := json.Marshal(a)
	return progCall{Tool: api.ToolSpawn, Args: b}
}

func rawCall(tool string, args any) progCall {
	b, _ := json.Marshal(args)
	return progCall{Tool: tool, Args: b}
}

// onHandle calls tool (await, status, cancel) on the handle returned by the
// call at index i of the same program (resolved by the helper at run time).
func onHandle(tool string, i int) progCall {
	return progCall{Tool: tool, Args: json.RawMessage(`{"handle":"$` + itoa(i) + `"}`)}
}

// Stand-ins a program's call arguments may hold as a whole string value,
// resolved by the helper from the answer of an earlier call N of the same
// program: "$N" its child's handle, "$N.resource" its resource_uri, "$N.uri"
// the uri of its reference distillate. Tests write "$N" as it is.
func resourceOf(i int) string { return "$" + itoa(i) + ".resource" }
func blobOf(i int) string     { return "$" + itoa(i) + ".uri" }

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// progClient is the helper's end of the control channel with a reader
// goroutine: responses by id, and ctrl/cancel as a channel.
type progClient struct {
	c       *childIO
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan json.RawMessage
	cancel  chan struct{}
}

func (pc *progClient) read() {
	for {
		f, err := pc.c.r.Read()
		if err != nil {
			os.Exit(0) // the supervisor is gone
		}
		switch {
		case f.IsResponse():
			pc.mu.Lock()
			ch := pc.waiting[f.ID]
			delete(pc.waiting, f.ID)
			pc.mu.Unlock()
			if ch != nil {
				ch <- f.Result
			}
		case f.Method == api.MethodPing:
			var p api.Ping
			_ = api.DecodeParams(f, &p)
			_ = pc.c.w.Send(api.MethodPong, 0, p)
		case f.Method == api.MethodCancel:
			select {
			case <-pc.cancel:
			default:
				close(pc.cancel)
			}
		}
	}
}

// call makes one tool call; ok is false if ctrl/cancel came first.
func (pc *progClient) call(tool string, args json.RawMessage, stopOnCancel bool) (api.ToolResult, bool) {
	return pc.request(api.MethodToolCall, api.ToolCall{Tool: tool, Args: args}, stopOnCancel)
}

// request sends one upward request and waits for its answer, decoded as a
// tool result; ok is false if ctrl/cancel came first.
func (pc *progClient) request(method string, params any, stopOnCancel bool) (api.ToolResult, bool) {
	raw, ok := pc.requestRaw(method, params, stopOnCancel)
	var r api.ToolResult
	_ = json.Unmarshal(raw, &r)
	return r, ok
}

// requestRaw is request with the answer as it came.
func (pc *progClient) requestRaw(method string, params any, stopOnCancel bool) (json.RawMessage, bool) {
	ch := make(chan json.RawMessage, 1)
	pc.mu.Lock()
	pc.next++
	id := pc.next
	pc.waiting[id] = ch
	pc.mu.Unlock()
	if err := pc.c.w.Send(method, id, params); err != nil {
		os.Exit(93)
	}
	if !stopOnCancel {
		return <-ch, true
	}
	select {
	case r := <-ch:
		return r, true
	case <-pc.cancel:
		return nil, false
	}
}

// substitute replaces every string value of args (at any depth) that is a key
// of subst by its value; other strings, such as a nested program inside an
// objective, are left alone.
func substitute(args json.RawMessage, subst map[string]string) json.RawMessage {
	if len(subst) == 0 || len(args) == 0 {
		return args
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		return args
	}
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if r, ok := subst[x]; ok {
				return r
			}
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return args
	}
	return out
}

func helperProg() int {
	c := helperIO()
	p := c.start()
	var pr prog
	if err := json.Unmarshal([]byte(p.Contract.Objective), &pr); err != nil {
		_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText("bad program: " + err.Error())})
		return 0
	}
	pc := &progClient{c: c, waiting: map[uint64]chan json.RawMessage{}, cancel: make(chan struct{})}
	go pc.read()
	rep := progReport{AgentID: p.AgentID, AgentPath: p.AgentPath, Depth: p.Depth, Scope: p.Scope.Allow, Tags: p.Scope.Tags, Limits: p.Limits, Telemetry: p.Telemetry, Seed: p.Seed.Slices, Agent: p.Agent, Results: []progResult{}}
	for _, t := range p.Tools {
		rep.Tools = append(rep.Tools, t.Name)
	}
	rep.Endpoint, rep.Breakers = p.Intelligence.Endpoint, p.Intelligence.Breakers
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, api.EnvIntelligenceKey) {
			rep.Keys = append(rep.Keys, kv)
		}
	}
	finish := func(status api.TerminalStatus) int {
		text := pr.Answer
		if text == "" {
			b, _ := json.Marshal(rep)
			text = string(b)
		}
		// Under-reports on purpose: the supervisor's count must win.
		_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: status, Distillate: api.InlineText(text), Usage: api.Usage{Steps: 1}})
		return 0
	}
	cancelled := func() int {
		for _, call := range pr.OnCancel {
			r, _ := pc.call(call.Tool, call.Args, false)
			rep.Results = append(rep.Results, progResult{Tool: call.Tool, IsError: r.IsError, Text: r.Text()})
		}
		return finish(api.StatusCancelled)
	}
	if pr.SleepMS > 0 {
		select {
		case <-time.After(time.Duration(pr.SleepMS) * time.Millisecond):
		case <-pc.cancel:
			return cancelled()
		}
	}
	for pr.WaitFile != "" {
		if _, err := os.Stat(pr.WaitFile); err == nil {
			break
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-pc.cancel:
			return cancelled()
		}
	}
	subst := map[string]string{}
	for i, call := range pr.Calls {
		if call.Touch != "" {
			_ = os.WriteFile(call.Touch, nil, 0o600)
		}
		args := substitute(call.Args, subst)
		r, ok := pc.call(call.Tool, args, true)
		if !ok {
			return cancelled()
		}
		var cr api.ChildReport
		_ = json.Unmarshal(r.StructuredContent, &cr)
		n := "$" + itoa(i)
		subst[n], subst[n+".resource"] = cr.Handle, cr.ResourceURI
		if d := cr.Distillate; d != nil && d.Reference != nil {
			subst[n+".uri"] = d.Reference.URI
		}
		rep.Results = append(rep.Results, progResult{Tool: call.Tool, IsError: r.IsError, Text: r.Text()})
	}
	if pr.Spend > 0 {
		for step := 1; ; step++ {
			_ = c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: step, Kind: api.EventModel, UsageDelta: api.Usage{TokensIn: pr.Spend, Steps: 1}})
			if _, ok := pc.call(api.ToolStatus, json.RawMessage(`{"handle":"none"}`), true); !ok {
				return cancelled()
			}
		}
	}
	if pr.Blob != "" {
		raw, ok := pc.requestRaw(api.MethodBlobPut, api.BlobPut{MediaType: "text/plain", Content: pr.Blob}, true)
		if !ok {
			return cancelled()
		}
		var ref api.BlobRef
		if pr.AnswerBlob && json.Unmarshal(raw, &ref) == nil && ref.URI != "" {
			_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted,
				Distillate: api.ResultBody{Reference: &api.Reference{URI: ref.URI, Summary: "summary"}}, Usage: api.Usage{Steps: 1}})
			return 0
		}
	}
	if pr.Hold {
		<-pc.cancel
		return cancelled()
	}
	return finish(api.StatusCompleted)
}

// --- test side ---

// recorder is an Observer that keeps every event, for assertions.
type recorder struct {
	logs     *testkit.Buffer
	mu       sync.Mutex
	started  []NodeInfo
	finished []finishedNode
}

type finishedNode struct {
	info NodeInfo
	res  api.SubagentResult
	at   time.Time
}

func (r *recorder) NodeStarted(n NodeInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, n)
}

func (r *recorder) NodeProgress(n NodeInfo) {}

func (r *recorder) NodeFinished(n NodeInfo, res api.SubagentResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, finishedNode{info: n, res: res, at: time.Now()})
}

// byPath returns the finished node at agent path p.
func (r *recorder) byPath(p string) (finishedNode, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.finished {
		if f.info.AgentPath == p {
			return f, true
		}
	}
	return finishedNode{}, false
}

func (r *recorder) startedPaths() map[string]NodeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]NodeInfo{}
	for _, n := range r.started {
		m[n.AgentPath] = n
	}
	return m
}

// pids returns the pid of every node that started a process.
func (r *recorder) pids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, n := range r.started {
		if n.PID > 0 {
			out = append(out, n.PID)
		}
	}
	return out
}

// newNestingSupervisor returns a supervisor running prog children, with a
// recorder, and checks at cleanup that every process group it started is gone.
func newNestingSupervisor(t *testing.T, mutate ...func(*Config)) (*Supervisor, *recorder) {
	t.Helper()
	rec := &recorder{}
	s, logs := newSupervisor(t, "prog", append([]func(*Config){func(c *Config) {
		c.Observer = rec
		// A race-enabled child sleeps a second at exit by default.
		c.Env = append(c.Env, "GORACE=atexit_sleep_ms=0")
	}}, mutate...)...)
	rec.logs = logs
	t.Cleanup(func() {
		for _, pid := range rec.pids() {
			testkit.WaitGroupGone(t, pid)
		}
	})
	return s, rec
}

// gate is a file a prog child waits for (prog.WaitFile) until the test opens it.
type gate string

func newGate(t *testing.T) gate { return gate(t.TempDir() + "/gate") }

func (g gate) open(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(string(g), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// runProg starts a tree whose root runs p and returns its result once the
// whole tree has ended.
func runProg(t *testing.T, s *Supervisor, p prog, mutate ...func(*api.SpawnPayload)) (*Run, api.SubagentResult) {
	t.Helper()
	pl := testPayload(p.objective(), time.Minute)
	pl.Limits.MaxSteps = 50
	pl.Limits.MaxTokens = 100000
	for _, m := range mutate {
		m(&pl)
	}
	r := start(t, s, pl)
	select {
	case <-r.TreeDone():
	case <-time.After(30 * time.Second):
		t.Fatal("tree did not end within 30s")
	}
	return r, r.Result()
}

// report decodes a prog child's default answer.
func report(t *testing.T, res api.SubagentResult) progReport {
	t.Helper()
	var rep progReport
	if err := json.Unmarshal([]byte(res.Distillate.Text()), &rep); err != nil {
		t.Fatalf("distillate is not a prog report: %v: %q (status %s %s)", err, res.Distillate.Text(), res.Status, res.Detail)
	}
	return rep
}

// childReportOf decodes a ChildReport from a tool result's text.
func childReportOf(t *testing.T, r progResult) api.ChildReport {
	t.Helper()
	var cr api.ChildReport
	if r.IsError || json.Unmarshal([]byte(r.Text), &cr) != nil {
		t.Fatalf("not a child report: %+v", r)
	}
	return cr
}
