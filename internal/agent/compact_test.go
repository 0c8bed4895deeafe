package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// longTools answers every tool call with a long text, so that a few calls
// fill a small context window.
type longTools struct{}

func (longTools) CallTool(ctx context.Context, name string, args json.RawMessage) (api.ToolResult, error) {
	return api.TextResult(name+": "+strings.Repeat("a long tool result line. ", 60), false), nil
}

// compactScript calls five tools (about 250 tokens of results each), then
// answers with how many messages it was sent last and every result it saw.
const compactScript = `window %d
[default]
call t/one
call t/two
call t/three
call t/four
call t/five
answer "messages={messages}"
`

func runCompacting(t *testing.T, window int, policy string) (api.SubagentResult, *usageLog, *recordingModel) {
	t.Helper()
	m, err := intelligence.New(api.Intelligence{Endpoint: "builtin:script=" + writeScript(t, strings.Replace(compactScript, "%d", itoa(window), 1))}, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingModel{Model: m}
	p := payload()
	p.Limits.MaxSteps, p.Limits.MaxTokens = 20, 100000
	p.Intelligence.Compaction = policy
	ev := &usageLog{}
	l := &Loop{Payload: p, Model: rec, Tools: offeredTools(p), Caller: longTools{}, Report: ev}
	return l.Run(context.Background()), ev, rec
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// recordingModel passes calls to a scripted model (and its window) and
// keeps every request it was sent.
type recordingModel struct {
	intelligence.Model
	reqs []intelligence.Request
}

func (r *recordingModel) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	c := *req
	c.Messages = append([]intelligence.Message(nil), req.Messages...)
	r.reqs = append(r.reqs, c)
	return r.Model.Complete(ctx, req)
}

func (r *recordingModel) ContextWindow() int64 {
	return r.Model.(intelligence.Windowed).ContextWindow()
}

// TestCompactionSummarizes: with a window the five results overflow, the
// older turns are summarized by a model call whose tokens are the run's
// (reported to the supervisor outside the step count), the system prompt
// and the objective are kept, and the task completes.
func TestCompactionSummarizes(t *testing.T) {
	res, ev, rec := runCompacting(t, 2000, "")
	if res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	var summaries, steps int
	var spent int64
	for i, req := range rec.reqs {
		if req.Compaction {
			summaries++
			continue
		}
		steps++
		if req.System == "" || req.Messages[0].Content != "the objective" && !strings.HasPrefix(req.Messages[0].Content, "do it") {
			t.Fatalf("call %d lost the system prompt or the objective: %+v", i, req.Messages[0])
		}
		var n int64
		for _, m := range req.Messages {
			n += int64(len(m.Content))
		}
		if n/4 > 2000 {
			t.Errorf("call %d sent about %d tokens to a window of 2000", i, n/4)
		}
	}
	if summaries == 0 || steps != 6 {
		t.Fatalf("%d summary calls, %d steps: want at least one summary and six steps", summaries, steps)
	}
	var sum api.Usage
	for _, d := range ev.deltas {
		if d.Steps == 0 {
			spent += d.TokensIn + d.TokensOut
		}
		sum = sum.Add(d)
	}
	if spent == 0 || sum.Tokens() != res.Usage.Tokens() || res.Usage.Steps != 6 {
		t.Fatalf("summary tokens %d reported; reported %+v vs result %+v", spent, sum, res.Usage)
	}
	if !strings.Contains(rec.reqs[len(rec.reqs)-1].Messages[1].Content, summaryLead) {
		t.Fatalf("the turn after the objective is not the summary: %q", rec.reqs[len(rec.reqs)-1].Messages[1].Content)
	}
}

// TestCompactionTrims: the trim policy shortens the older tool results and
// makes no model call of its own.
func TestCompactionTrims(t *testing.T) {
	res, _, rec := runCompacting(t, 2000, api.CompactTrim)
	if res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	last := rec.reqs[len(rec.reqs)-1]
	trimmed := 0
	for _, req := range rec.reqs {
		if req.Compaction {
			t.Fatal("trim made a model call")
		}
	}
	for _, m := range last.Messages {
		if strings.Contains(m.Content, "[trimmed to fit the context window") {
			trimmed++
		}
	}
	if trimmed == 0 || res.Distillate.Text() != "messages=11" {
		t.Fatalf("%d trimmed results; answer %q (want all 11 messages kept, the older shortened)", trimmed, res.Distillate.Text())
	}
}

// TestWindowSmallerThanTheSystemPrompt: a clear error before any model
// call, not a loop of compactions.
func TestWindowSmallerThanTheSystemPrompt(t *testing.T) {
	res, _, rec := runCompacting(t, 50, "")
	if res.Status != api.StatusCrashed || !strings.Contains(res.Detail, "context window of 50 tokens cannot hold the system prompt") || len(rec.reqs) != 0 {
		t.Fatalf("result %+v after %d calls", res, len(rec.reqs))
	}
}
