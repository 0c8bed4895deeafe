package agent

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// seeingModel answers from canned turns and keeps a copy of each
// request's messages.
type seeingModel struct {
	scriptModel
	seen [][]intelligence.Message
}

func (m *seeingModel) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	m.seen = append(m.seen, append([]intelligence.Message(nil), req.Messages...))
	return m.scriptModel.Complete(ctx, req)
}

// askCaller answers every call with answer and keeps the conversation a
// subagent.ask call carried.
type askCaller struct {
	answer string
	conv   *api.Conversation
	calls  []string
}

func (a *askCaller) CallTool(ctx context.Context, name string, args json.RawMessage) (api.ToolResult, error) {
	a.calls = append(a.calls, name)
	return api.TextResult("ok", false), nil
}

func (a *askCaller) CallToolWith(ctx context.Context, name string, args json.RawMessage, conv *api.Conversation) (api.ToolResult, error) {
	a.calls = append(a.calls, name)
	a.conv = conv
	return api.TextResult(a.answer, false), nil
}

func askTurns() []*intelligence.Response {
	return []*intelligence.Response{
		{Content: "I need to ask", ToolCalls: []intelligence.ToolCall{
			{ID: "c1", Name: "subagent_ask", Args: json.RawMessage(`{"question":"which?"}`)},
			{ID: "c2", Name: "t", Args: json.RawMessage(`{}`)},
		}, Finish: intelligence.FinishToolCalls, Usage: api.Usage{TokensIn: 10, TokensOut: 5}},
		{Content: "done", Finish: intelligence.FinishStop, Usage: api.Usage{TokensIn: 20, TokensOut: 3}},
	}
}

// A run resumed from the conversation its subagent.ask call carried, with
// the answer, shows the model what the uninterrupted run showed it at its
// next step (the same turns, the answer as the call's result, the later
// call's result), runs the pending turn's later call, never re-sends the
// first prompt, and counts its usage on from the stored one.
func TestResumeGivesTheModelTheSameConversation(t *testing.T) {
	tools := []intelligence.ToolSpec{{Name: "subagent_ask", Wire: api.ToolAsk}, {Name: "t", Wire: "s/t"}}
	whole := &seeingModel{scriptModel: scriptModel{turns: askTurns()}}
	caller := &askCaller{answer: "2.0"}
	res := (&Loop{Payload: payload(), Model: whole, Tools: tools, Caller: caller, Report: &events{}}).Run(context.Background())
	if res.Status != api.StatusCompleted || len(whole.seen) != 2 {
		t.Fatalf("the whole run: %+v after %d model calls", res, len(whole.seen))
	}
	conv := caller.conv
	if conv == nil || conv.CallID != "c1" || conv.Usage.Steps != 1 || conv.Usage.TokensIn != 10 {
		t.Fatalf("the ask call carried %+v, want the conversation at step 1 waiting on c1", conv)
	}
	if err := conv.Validate(); err != nil {
		t.Fatal(err)
	}

	p := payload()
	p.Resume = &api.Resume{Conversation: *conv, Answer: "2.0"}
	b, err := json.Marshal(p) // as the spawn frame carries it
	if err != nil {
		t.Fatal(err)
	}
	var back api.SpawnPayload
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	resumed := &seeingModel{scriptModel: scriptModel{turns: askTurns()[1:]}}
	rc := &askCaller{}
	res2 := (&Loop{Payload: &back, Model: resumed, Tools: tools, Caller: rc, Report: &events{}}).Run(context.Background())
	if res2.Status != api.StatusCompleted || res2.Distillate.Text() != "done" {
		t.Fatalf("the resumed run: %+v", res2)
	}
	if len(resumed.seen) != 1 || !reflect.DeepEqual(resumed.seen[0], whole.seen[1]) {
		t.Fatalf("the resumed model saw\n%+v\nwant what the whole run's second step saw\n%+v", resumed.seen, whole.seen[1])
	}
	if !reflect.DeepEqual(rc.calls, []string{"s/t"}) {
		t.Fatalf("the resumed run called %v, want only the pending turn's later call", rc.calls)
	}
	if res2.Usage != res.Usage {
		t.Fatalf("resumed usage %+v, want the whole run's %+v", res2.Usage, res.Usage)
	}
}

// A payload whose stored conversation cannot be resumed ends the run
// crashed with the reason, before any model call.
func TestResumeBadConversation(t *testing.T) {
	for name, conv := range map[string]api.Conversation{
		"no turns":     {CallID: "c1"},
		"no such call": {Messages: []api.ConversationMessage{{Role: api.RoleUser, Content: "x"}, {Role: api.RoleAssistant, ToolCalls: []api.ConversationToolCall{{ID: "c0", Name: "n"}}}}, CallID: "c1"},
		"bad role":     {Messages: []api.ConversationMessage{{Role: "system", Content: "x"}, {Role: api.RoleAssistant, ToolCalls: []api.ConversationToolCall{{ID: "c1", Name: "n"}}}}, CallID: "c1"},
		"turn after":   {Messages: []api.ConversationMessage{{Role: api.RoleAssistant, ToolCalls: []api.ConversationToolCall{{ID: "c1", Name: "n"}}}, {Role: api.RoleUser, Content: "x"}}, CallID: "c1"},
	} {
		t.Run(name, func(t *testing.T) {
			p := payload()
			p.Resume = &api.Resume{Conversation: conv, Answer: "a"}
			m := &seeingModel{scriptModel: scriptModel{turns: askTurns()}}
			res := (&Loop{Payload: p, Model: m, Caller: &askCaller{}, Report: &events{}}).Run(context.Background())
			if res.Status != api.StatusCrashed || !strings.Contains(res.Detail, "bad conversation") || len(m.seen) != 0 {
				t.Fatalf("got %+v after %d model calls, want crashed naming the bad conversation before any", res, len(m.seen))
			}
		})
	}
}
