package telemetry

import (
	"fmt"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
)

// Content is what --log-content (a payload's telemetry.log_content) lets into
// logs and span attributes: prompts, model answers, and tool arguments and
// results. With it off, the default, none of them is logged or traced; the
// lines and spans of model and tool calls still exist, with their sizes,
// names and statuses only.

// The span attributes that carry content (OpenTelemetry GenAI semantic
// conventions), set only with content on.
const (
	AttrSystemInstructions = "gen_ai.system_instructions"
	AttrInputMessages      = "gen_ai.input.messages"
	AttrOutputMessages     = "gen_ai.output.messages"
	AttrToolArguments      = "gen_ai.tool.call.arguments"
	AttrToolResult         = "gen_ai.tool.call.result"
)

// ContentCap bounds one content value in a log line or a span attribute.
const ContentCap = 16 << 10

// Clip returns s cut at ContentCap bytes, on a rune boundary, with a note of
// how much was cut.
func Clip(s string) string {
	if len(s) <= ContentCap {
		return s
	}
	end := ContentCap
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + fmt.Sprintf("...[%d more bytes]", len(s)-end)
}

// ResultDescription is the span status description of a result that is not
// completed: its status and cause, and its detail unless the detail holds
// content (a model's refusal text, a schema mismatch that quotes the answer)
// and content is off.
func ResultDescription(res api.SubagentResult, content bool) string {
	d := string(res.Status)
	if res.Cause != "" {
		d += " (" + res.Cause + ")"
	}
	if res.Detail == "" || (!content && DetailIsContent(res)) {
		return d
	}
	return d + ": " + res.Detail
}

// DetailIsContent reports whether a result's detail may quote what a model
// said: the detail of a refusal (the model's refusal text) or of a schema
// mismatch (the validation error, which quotes the answer).
func DetailIsContent(res api.SubagentResult) bool {
	return res.Status == api.StatusRefused || res.Cause == api.CauseSchemaMismatch
}
