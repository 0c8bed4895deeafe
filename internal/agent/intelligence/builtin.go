package intelligence

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
)

// newDemoModel returns "builtin:demo", the embedded default: it answers an
// objective with checkable facts about its text, without any network. A
// one-line objective gets its word and character counts. An objective of
// several lines is fanned out: one async child per line, spawned in one turn
// and run in parallel, then awaited; the answer joins their distillates, one
// numbered line each. A line whose spawn the chokepoint refused (a cap, the
// rate) is answered by the parent itself, so the answer does not depend on the
// caps. It is a scripted model (script.go) whose steps are built from the
// objective. "builtin:demo=DURATION" thinks that long before its first turn (a
// slow model, for trying streaming, follow-ups and cancellation); the wait ends
// early when the run is cancelled.
func newDemoModel(think time.Duration) *scriptedModel {
	plan := demoPlan
	if think > 0 {
		plan = func(req *Request) []step {
			return append([]step{{kind: stepSleep, d: think}}, demoPlan(req)...)
		}
	}
	return &scriptedModel{plan: plan}
}

func demoPlan(req *Request) []step {
	var lines []string
	for _, l := range strings.Split(req.Objective, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) <= 1 {
		text := ""
		if len(lines) == 1 {
			text = describeLine(lines[0])
		}
		return []step{{kind: stepAnswer, answerFn: func(*scriptedModel) string { return text }}}
	}
	spawn := step{kind: stepSpawn}
	for _, l := range lines {
		spawn.spawns = append(spawn.spawns, api.SpawnArgs{
			Contract:    api.OutputContract{Objective: l, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
			Disposition: api.DispositionAsync,
		})
	}
	join := func(m *scriptedModel) string {
		parts := make([]string, len(lines))
		for i, l := range lines {
			var text string
			switch c := m.children[i]; {
			case c.report != nil && c.report.Status == api.StatusCompleted:
				text = c.report.Distillate.Text()
			case c.report != nil:
				text = fmt.Sprintf("subagent %s ended %s: %s", c.report.AgentPath, c.report.Status, c.report.Detail)
			default: // refused at the chokepoint: answered here
				text = describeLine(l)
			}
			parts[i] = fmt.Sprintf("%d. %s", i+1, text)
		}
		return strings.Join(parts, "\n")
	}
	return []step{spawn, {kind: stepAwait}, {kind: stepAnswer, answerFn: join}}
}

// describeLine states a line's word and character counts.
func describeLine(l string) string {
	return fmt.Sprintf("%q has %d words and %d characters", l, len(strings.Fields(l)), utf8.RuneCountInString(l))
}

// usageOf is a builtin model's deterministic usage for one call.
func usageOf(req *Request, out string) api.Usage {
	return api.Usage{TokensIn: requestTokens(req), TokensOut: estimateTokens(out)}
}

// waitModel is "builtin:wait": its one model call blocks until the run is
// cancelled or its deadline passes. It stands in for a long model call in
// cancellation and deadline tests and demos.
type waitModel struct{}

func (waitModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}
