package intelligence

import "strings"

// Windowed is a model that knows its own context window, in tokens (a
// builtin:script declares one with a window line).
type Windowed interface {
	ContextWindow() int64
}

// knownWindows are the context windows of common model names, by name
// prefix, in tokens (docs/intelligence.md, "Compaction"). The longest
// matching prefix wins.
var knownWindows = []struct {
	prefix string
	tokens int64
}{
	{"gpt-4.1", 1047576},
	{"gpt-4o", 128000},
	{"gpt-4-turbo", 128000},
	{"gpt-3.5-turbo", 16385},
	{"o1", 200000},
	{"o3", 200000},
	{"o4-mini", 200000},
	{"claude-", 200000},
	{"llama3.1", 128000},
	{"llama3.2", 128000},
	{"llama3.3", 128000},
	{"qwen2.5", 32768},
	{"mistral", 32768},
}

// KnownWindow returns the context window of a common model name (matched by
// prefix, case-insensitively), or 0 for a name it does not know.
func KnownWindow(model string) int64 {
	model = strings.ToLower(model)
	var best string
	var tokens int64
	for _, k := range knownWindows {
		if strings.HasPrefix(model, k.prefix) && len(k.prefix) > len(best) {
			best, tokens = k.prefix, k.tokens
		}
	}
	return tokens
}

// EstimateTokens is the estimate of the tokens of a text that compaction
// uses where no model reported a count: one token per four bytes, rounded
// up (as the builtin models count).
func EstimateTokens(s string) int64 { return estimateTokens(s) }
