package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// Compaction (docs/intelligence.md, "Compaction"): when the conversation
// nears the model's context window, the turns between the first user turn
// (the objective) and the latest keepTurns assistant turns are compacted by
// the intelligence's policy, so that the loop goes on instead of failing at
// the model's limit. The system prompt and the objective are always kept.
const (
	// compactAt is the share of the window, in percent, past which the
	// conversation is compacted before the next model call: the rest is
	// room for the answer.
	compactAt = 80
	// keepTurns is how many of the latest assistant turns (each with its
	// tool results) compaction keeps as they are; only the latest one when
	// the two would not leave the conversation under compactAt.
	keepTurns = 2
	// trimChars is what the trim policy keeps of an older tool result.
	trimChars = 200
)

// compactSystem is the system prompt of the summarize policy's model call.
const compactSystem = "You compact a conversation for the agent that will continue it. Summarize the turns below: the facts learned, the tool results that matter (with their exact values), the decisions made and what is left to do. Write plain text, as short as the facts allow; do not address the user."

// summaryLead opens the user turn that stands in for the compacted turns.
const summaryLead = "[Summary of the earlier turns, compacted to fit the context window]\n"

// contextWindow is the window the run compacts against: the intelligence's
// configured one, else the model's own (a script's), else the known window
// of its model name; 0 for none (no compaction).
func (l *Loop) contextWindow() int64 {
	if w := l.Payload.Intelligence.ContextWindow; w > 0 {
		return w
	}
	if m, ok := l.Model.(intelligence.Windowed); ok {
		if w := m.ContextWindow(); w > 0 {
			return w
		}
	}
	return intelligence.KnownWindow(l.Payload.Intelligence.Model)
}

// estimate is the conversation's size in tokens as the next call would send
// it: the usage the model reported on the last call (its prompt and its
// answer, now a turn) plus an estimate of the turns added since, or the
// estimate of the whole (system prompt, tools, turns) when that is larger or
// there is no such call (the first, or the first after a compaction).
func (r *run) estimate() int64 {
	n := intelligence.EstimateTokens(r.req.System) + toolTokens(r.req.Tools)
	for _, m := range r.req.Messages {
		n += messageTokens(m)
	}
	if r.lastTokens > 0 && r.lastLen < len(r.req.Messages) {
		reported := r.lastTokens
		for _, m := range r.req.Messages[r.lastLen+1:] {
			reported += messageTokens(m)
		}
		n = max(n, reported)
	}
	return n
}

func messageTokens(m intelligence.Message) int64 {
	n := intelligence.EstimateTokens(m.Content)
	for _, tc := range m.ToolCalls {
		n += intelligence.EstimateTokens(tc.Name) + intelligence.EstimateTokens(string(tc.Args))
	}
	return n
}

func toolTokens(tools []intelligence.ToolSpec) int64 {
	var n int64
	for _, t := range tools {
		n += intelligence.EstimateTokens(t.Name) + intelligence.EstimateTokens(t.Description) + intelligence.EstimateTokens(string(t.Parameters))
	}
	return n
}

// compact runs before each model call. It ends the run (crashed) when the
// window cannot hold even the system prompt and the objective; otherwise,
// past compactAt percent of the window, it compacts the older turns by the
// policy. A summary's tokens count against the grant, as any model call's.
func (r *run) compact(ctx context.Context) (api.SubagentResult, bool) {
	window := r.window
	if window <= 0 {
		return api.SubagentResult{}, false
	}
	floor := intelligence.EstimateTokens(r.req.System) + toolTokens(r.req.Tools) + messageTokens(r.req.Messages[0])
	if !r.fits {
		if floor >= window {
			return r.result(ctx, api.StatusCrashed, fmt.Sprintf("the model's context window of %d tokens cannot hold the system prompt, the tools and the objective (about %d tokens): configure a larger context_window or a shorter system prompt", window, floor)), true
		}
		r.fits = true
	}
	before := r.estimate()
	if before*100 < window*compactAt {
		return api.SubagentResult{}, false
	}
	cut := r.compactCut(keepTurns)
	if cut > 1 && (floor+tailTokens(r.req.Messages[cut:]))*100 >= window*compactAt {
		cut = r.compactCut(1) // two turns would leave it over: keep the latest alone
	}
	if cut <= 1 {
		return api.SubagentResult{}, false // nothing older than the latest turns
	}
	policy := r.p.Intelligence.Compaction
	if policy == "" {
		policy = api.CompactSummarize
	}
	var spent api.Usage
	if policy == api.CompactSummarize {
		summary, usage, err := r.summarize(ctx, r.req.Messages[1:cut], window)
		spent = usage
		if err != nil {
			if ctx.Err() != nil {
				return r.stopped(ctx), true
			}
			r.l.Log.Warn("compaction: the summary call failed; trimming instead", "err", err)
			policy = api.CompactTrim
		} else {
			msgs := append([]intelligence.Message{r.req.Messages[0], {Role: intelligence.RoleUser, Content: summaryLead + summary}}, r.req.Messages[cut:]...)
			r.req.Messages = msgs
		}
	}
	if policy == api.CompactTrim {
		for i := 1; i < cut; i++ {
			m := &r.req.Messages[i]
			if m.Role == intelligence.RoleTool && runeCount(m.Content) > trimChars {
				m.Content = string([]rune(m.Content)[:trimChars]) + fmt.Sprintf("\n[trimmed to fit the context window: the first %d of %d characters]", trimChars, runeCount(m.Content))
			}
		}
	}
	r.lastTokens = 0 // the reported count no longer describes the conversation
	r.compactions++
	r.l.Log.Info("conversation compacted", "step", r.usage.Steps, "policy", policy, "window", window,
		"tokens_before", before, "tokens_after", r.estimate(), "tokens_in", spent.TokensIn, "tokens_out", spent.TokensOut)
	if r.usage.Tokens() > r.p.Limits.MaxTokens {
		return r.result(ctx, api.StatusExhaustedTokens, fmt.Sprintf("%d tokens used (compaction included), grant %d", r.usage.Tokens(), r.p.Limits.MaxTokens)), true
	}
	return api.SubagentResult{}, false
}

// compactCut is the index of the first message compaction keeps: the
// keep'th assistant turn from the end, so that no tool result is parted from
// its call; 0 when there are not that many.
func (r *run) compactCut(keep int) int {
	msgs := r.req.Messages
	seen := 0
	for i := len(msgs) - 1; i >= 1; i-- {
		if msgs[i].Role == intelligence.RoleAssistant {
			seen++
			if seen == keep {
				return i
			}
		}
	}
	return 0
}

func tailTokens(msgs []intelligence.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += messageTokens(m)
	}
	return n
}

// summarize asks the model for a summary of older: a model call outside the
// step count whose usage is the run's and is reported to the supervisor,
// which counts it against the grant and the tree.
func (r *run) summarize(ctx context.Context, older []intelligence.Message, window int64) (string, api.Usage, error) {
	var b strings.Builder
	for _, m := range older {
		fmt.Fprintf(&b, "[%s] %s\n", m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "[%s called %s] %s\n", m.Role, tc.Name, tc.Args)
		}
	}
	text := b.String()
	// The summary call itself fits in half the window.
	if limit := int(window) * 2; runeCount(text) > limit {
		text = string([]rune(text)[runeCount(text)-limit:])
	}
	req := &intelligence.Request{
		System:     compactSystem,
		Messages:   []intelligence.Message{{Role: intelligence.RoleUser, Content: text}},
		Objective:  r.req.Objective,
		AgentPath:  r.req.AgentPath,
		Depth:      r.req.Depth,
		Compaction: true,
	}
	resp, err := r.l.Model.Complete(ctx, req)
	if err != nil {
		return "", api.Usage{}, err
	}
	delta := api.Usage{TokensIn: resp.Usage.TokensIn, TokensOut: resp.Usage.TokensOut}
	r.usage.TokensIn += delta.TokensIn
	r.usage.TokensOut += delta.TokensOut
	r.l.Report.Event(r.usage.Steps, api.EventModel, delta)
	if strings.TrimSpace(resp.Content) == "" {
		return "", delta, fmt.Errorf("agent: compaction: the model's summary is empty")
	}
	return resp.Content, delta, nil
}
