package mcp

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/api"
)

// convertResult turns an MCP CallToolResult into the tool result a subagent
// receives: text blocks as they are, other content described in a line of
// text (a model behind the loop reads text), structured content as JSON. The
// text is capped at max bytes in total and the structured content at max
// bytes; whatever is cut is replaced by a note saying so.
func convertResult(wire string, res *sdk.CallToolResult, max int) api.ToolResult {
	out := api.ToolResult{IsError: res.IsError}
	var texts []string
	for _, c := range res.Content {
		texts = append(texts, contentText(c))
	}
	out.Content = capTexts(texts, max)
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		switch {
		case err != nil:
			out.Content = append(out.Content, text(fmt.Sprintf("[agentd: the structured content of %s did not encode: %v]", wire, err)))
		case len(b) > max:
			out.Content = append(out.Content, text(fmt.Sprintf("[agentd: structured content of %d bytes dropped: over the cap of %d bytes]", len(b), max)))
		default:
			out.StructuredContent = b
		}
	}
	if out.Content == nil {
		out.Content = []api.ToolContent{}
	}
	return out
}

func text(s string) api.ToolContent { return api.ToolContent{Type: "text", Text: s} }

// contentText renders one content block as text.
func contentText(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes: not shown]", c.MIMEType, len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes: not shown]", c.MIMEType, len(c.Data))
	case *sdk.ResourceLink:
		s := "[resource link " + c.URI
		if c.Name != "" {
			s += " (" + c.Name + ")"
		}
		if c.Description != "" {
			s += ": " + c.Description
		}
		return s + "]"
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[embedded resource: empty]"
		}
		if r.Text != "" {
			return "[resource " + r.URI + "]\n" + r.Text
		}
		return fmt.Sprintf("[resource %s %s, %d bytes: not shown]", r.URI, r.MIMEType, len(r.Blob))
	default:
		return fmt.Sprintf("[content of type %T: not shown]", c)
	}
}

// capTexts keeps at most max bytes of texts in total, cutting on a UTF-8
// boundary, and appends a note when anything was cut.
func capTexts(texts []string, max int) []api.ToolContent {
	total := 0
	for _, t := range texts {
		total += len(t)
	}
	var out []api.ToolContent
	if total <= max {
		for _, t := range texts {
			out = append(out, text(t))
		}
		return out
	}
	left := max
	for _, t := range texts {
		if left <= 0 {
			break
		}
		if len(t) <= left {
			left -= len(t)
			out = append(out, text(t))
			continue
		}
		cut := left
		for cut > 0 && !utf8.RuneStart(t[cut]) {
			cut--
		}
		left -= cut
		if cut > 0 {
			out = append(out, text(t[:cut]))
		}
		break
	}
	shown := max - left
	return append(out, text(fmt.Sprintf("[agentd: result truncated: %d of %d bytes shown; the cap is %d bytes]", shown, total, max)))
}
