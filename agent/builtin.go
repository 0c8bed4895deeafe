package agent

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
)

// demoModel is "builtin:demo", the embedded default: it answers an objective
// with checkable facts about its text, without any network. A one-line objective
// gets its word and character counts; an objective of several lines gets one
// such line per input line. "builtin:demo=DURATION" thinks that long before
// each answer (a slow model, for trying streaming, follow-ups and cancellation);
// the wait ends early when the run is cancelled.
type demoModel struct {
	think time.Duration
}

func (m demoModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	if m.think > 0 {
		t := time.NewTimer(m.think)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(req.Objective, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	var out string
	if len(lines) == 1 {
		out = describeLine(lines[0])
	} else {
		parts := make([]string, len(lines))
		for i, l := range lines {
			parts[i] = fmt.Sprintf("%d. %s", i+1, describeLine(l))
		}
		out = strings.Join(parts, "\n")
	}
	return &Response{
		Content: out,
		Finish:  FinishStop,
		Usage:   usageOf(req, out),
	}, nil
}

// describeLine states a line's word and character counts.
func describeLine(l string) string {
	return fmt.Sprintf("%q has %d words and %d characters", l, len(strings.Fields(l)), utf8.RuneCountInString(l))
}

// usageOf is a builtin model's deterministic usage for one call.
func usageOf(req *Request, out string) api.Usage {
	return api.Usage{TokensIn: estimateTokens(requestText(req)), TokensOut: estimateTokens(out)}
}

// waitModel is "builtin:wait": its one model call blocks until the run is
// cancelled or its deadline passes. It stands in for a long model call in
// cancellation and deadline tests and demos.
type waitModel struct{}

func (waitModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}
