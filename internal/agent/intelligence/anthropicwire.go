package intelligence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentd/agentd/api"
)

// The Messages wire types: the part of Anthropic's Messages API agentd sends
// and reads. Fields of an answer that agentd does not use are not decoded;
// content blocks of other types (thinking, server tools' blocks) are
// skipped.

// msgRequest is the body of POST {base}/messages.
type msgRequest struct {
	Model     string       `json:"model"`
	MaxTokens int64        `json:"max_tokens"`
	System    string       `json:"system,omitempty"`
	Messages  []msgMessage `json:"messages"`
	Tools     []msgTool    `json:"tools,omitempty"`
	Stream    bool         `json:"stream,omitempty"`
	// toolsJSON, when set, is Tools encoded (the model's toolsCache),
	// written in their place.
	toolsJSON []byte
}

// messagesBody is r's JSON body, as json.Marshal writes it, with the
// conversation's text by reference (jsonBody).
func messagesBody(r *msgRequest) (*jsonBody, error) {
	b := &jsonBody{}
	b.raw(`{"model":`)
	b.str(r.Model)
	b.raw(`,"max_tokens":` + strconv.FormatInt(r.MaxTokens, 10))
	if r.System != "" {
		b.raw(`,"system":`)
		b.str(r.System)
	}
	b.raw(`,"messages":`)
	if r.Messages == nil {
		b.raw("null")
	} else {
		b.raw("[")
	}
	for i, m := range r.Messages {
		if i > 0 {
			b.raw(",")
		}
		b.raw(`{"role":`)
		b.str(m.Role)
		b.raw(`,"content":`)
		if m.Content == nil {
			b.raw("null")
		} else {
			b.raw("[")
		}
		for j, c := range m.Content {
			if j > 0 {
				b.raw(",")
			}
			b.raw(`{"type":`)
			b.str(c.Type)
			for _, f := range []struct{ name, v string }{{"text", c.Text}, {"id", c.ID}, {"name", c.Name}} {
				if f.v != "" {
					b.raw(`,"` + f.name + `":`)
					b.str(f.v)
				}
			}
			if len(c.Input) > 0 {
				if err := checkJSON(c.Input); err != nil {
					return nil, fmt.Errorf("tool_use %q: input: %w", c.Name, err)
				}
				b.raw(`,"input":`)
				b.json(c.Input)
			}
			for _, f := range []struct{ name, v string }{{"tool_use_id", c.ToolUseID}, {"content", c.Content}} {
				if f.v != "" {
					b.raw(`,"` + f.name + `":`)
					b.str(f.v)
				}
			}
			b.raw("}")
		}
		if m.Content != nil {
			b.raw("]")
		}
		b.raw("}")
	}
	if r.Messages != nil {
		b.raw("]")
	}
	switch {
	case r.toolsJSON != nil:
		b.raw(`,"tools":`)
		b.ref(r.toolsJSON)
	case len(r.Tools) > 0:
		enc, err := msgToolsJSON(r.Tools)
		if err != nil {
			return nil, err
		}
		b.raw(`,"tools":`)
		b.ref(enc)
	}
	if r.Stream {
		b.raw(`,"stream":true`)
	}
	b.raw("}")
	return b.done(), nil
}

// msgToolsJSON is tools as json.Marshal writes them, in a slice of their
// length. A tool's schema that is not valid JSON is an error.
func msgToolsJSON(tools []msgTool) ([]byte, error) {
	for _, t := range tools {
		if err := checkJSON(t.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: input_schema: %w", t.Name, err)
		}
	}
	return encodeJSON(func(w jsonOut) {
		w.raw("[")
		for i, t := range tools {
			if i > 0 {
				w.raw(",")
			}
			w.raw(`{"name":`)
			w.str(t.Name)
			if t.Description != "" {
				w.raw(`,"description":`)
				w.str(t.Description)
			}
			w.raw(`,"input_schema":`)
			w.json(t.InputSchema)
			w.raw("}")
		}
		w.raw("]")
	}), nil
}

// msgMessage is one turn sent: role user or assistant, its content as
// blocks.
type msgMessage struct {
	Role    string     `json:"role"`
	Content []msgBlock `json:"content"`
}

// msgBlock is a content block sent: text, tool_use (an assistant's call,
// sent back) or tool_result (a user turn's answer to a call).
type msgBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

// msgTool offers one tool to the model.
type msgTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"` // sent as written: its numbers are not rounded
}

// msgResponse is what agentd reads of a message, whole or assembled from a
// stream.
type msgResponse struct {
	Type       string            `json:"type"`
	Content    []msgContentBlock `json:"content"`
	StopReason string            `json:"stop_reason"`
	Usage      msgUsage          `json:"usage"`
}

// msgContentBlock is a content block of an answer.
type msgContentBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// msgUsage is a message's token counts. input_tokens leaves out the tokens
// read from and written to the prompt cache. In a stream, message_delta
// carries cumulative counts: those it has replace message_start's, so the
// fields are pointers, nil when absent.
type msgUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// merge overwrites u's counts with those v has.
func (u *msgUsage) merge(v msgUsage) {
	for _, f := range []struct{ dst, src **int64 }{
		{&u.InputTokens, &v.InputTokens}, {&u.OutputTokens, &v.OutputTokens},
		{&u.CacheCreationInputTokens, &v.CacheCreationInputTokens}, {&u.CacheReadInputTokens, &v.CacheReadInputTokens},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// text is the answer's text blocks joined.
func (r *msgResponse) text() string {
	var s string
	for _, b := range r.Content {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}

// msgError is the body of an error answer, and of a stream's error event:
// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}.
type msgError struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicErrorMessage is an error answer's "TYPE: message" (at most 300
// bytes), else what errorMessage finds in another shape (a proxy's).
func anthropicErrorMessage(b []byte) string {
	var e msgError
	if json.Unmarshal(b, &e) == nil && e.Error.Type != "" {
		if e.Error.Message == "" {
			return clip(e.Error.Type)
		}
		return clip(e.Error.Type + ": " + e.Error.Message)
	}
	return errorMessage(b)
}

// decodeMessage decodes a whole (non-streamed) answer. A body that is not a
// message (type "message") is an error naming what it is.
func decodeMessage(b []byte) (*msgResponse, error) {
	var mr msgResponse
	if err := json.Unmarshal(b, &mr); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	switch mr.Type {
	case "message":
		return &mr, nil
	case "error":
		return nil, fmt.Errorf("the answer is an error: %s", anthropicErrorMessage(b))
	case "":
		return nil, errors.New("decode answer: not a Messages answer (no type)")
	}
	return nil, fmt.Errorf("decode answer: not a Messages answer (type %q)", clip(mr.Type))
}

// messagesRequest turns a Request into the Messages request body. The
// conversation's tool turns become tool_result blocks of one user turn after
// the assistant's tool_use blocks, and consecutive turns of one role are
// merged (the API wants user and assistant turns alternating); an empty
// assistant turn is left out, as the API refuses empty content. The request
// streams when req.OnText is set. Its tools are msgTools', kept encoded in
// the model's toolsCache.
func (m *anthropicModel) messagesRequest(req *Request) msgRequest {
	mr := msgRequest{Model: m.model, MaxTokens: m.maxTokens, System: req.System, Stream: req.OnText != nil,
		Messages: make([]msgMessage, 0, len(req.Messages))}
	add := func(role string, blocks ...msgBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(mr.Messages); n > 0 && mr.Messages[n-1].Role == role {
			mr.Messages[n-1].Content = append(mr.Messages[n-1].Content, blocks...)
			return
		}
		mr.Messages = append(mr.Messages, msgMessage{Role: role, Content: blocks})
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case RoleUser:
			if msg.Content != "" {
				add("user", msgBlock{Type: "text", Text: msg.Content})
			}
		case RoleTool:
			add("user", msgBlock{Type: "tool_result", ToolUseID: msg.ToolCallID, Content: msg.Content})
		case RoleAssistant:
			var blocks []msgBlock
			if msg.Content != "" {
				blocks = append(blocks, msgBlock{Type: "text", Text: msg.Content})
			}
			for _, tc := range msg.ToolCalls {
				blocks = append(blocks, msgBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Args)})
			}
			add("assistant", blocks...)
		}
	}
	return mr
}

// msgTools is the tools offered, as the Messages API wants them.
func msgTools(specs []ToolSpec) []msgTool {
	out := make([]msgTool, 0, len(specs))
	for _, t := range specs {
		out = append(out, msgTool{Name: t.Name, Description: t.Description, InputSchema: inputSchema(t.Parameters)})
	}
	return out
}

// toolInput is a tool call's arguments as a tool_use block's input, which
// must be a JSON object: arguments that are not one (a model's malformed
// call, which the loop answered with an error) are sent as {}.
func toolInput(args json.RawMessage) json.RawMessage {
	if !isObject(args) {
		return json.RawMessage(`{}`)
	}
	return args
}

// inputSchema is a tool's argument schema as the Messages API wants it: a
// JSON object schema whose type is "object". A missing or non-object schema
// becomes the empty object schema; an object without a type gets
// "type":"object". Its values are passed as written.
func inputSchema(schema json.RawMessage) json.RawMessage {
	if !isObject(schema) {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	if hasKey(schema, "type") { // as is, without decoding it
		return schema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(schema, &m) != nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	m["type"] = json.RawMessage(`"object"`)
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return b
}

// hasKey says whether obj, a JSON object (isObject), has key among its
// own members, as json.Unmarshal into a map would find it (a key's escapes
// read).
func hasKey(obj []byte, key string) bool {
	depth, atKey := 0, false
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '{':
			depth++
			atKey = depth == 1
		case '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			atKey = depth == 1
		case '"':
			end := i + 1
			for ; end < len(obj) && obj[end] != '"'; end++ {
				if obj[end] == '\\' {
					end++
				}
			}
			if atKey && keyIs(obj[i+1:min(end, len(obj))], key) {
				return true
			}
			atKey, i = false, end
		}
	}
	return false
}

// keyIs says whether the contents of a JSON string, lit, unquoted, are key.
func keyIs(lit []byte, key string) bool {
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit) == key
	}
	n, ok := unquotedLen(lit)
	return ok && n == len(key) && string(appendUnquoted(make([]byte, 0, n), lit)) == key
}

// convertMessage turns a message into a Response. Stop reasons map to
// finish reasons: end_turn, stop_sequence and pause_turn (which only server
// tools cause, and agentd offers none) to stop; tool_use to tool_calls;
// max_tokens and model_context_window_exceeded to length; refusal to
// refusal. Usage counts the cache's tokens in TokensIn, and says how many
// were which.
func convertMessage(mr *msgResponse, req *Request) *Response {
	out := &Response{Content: mr.text()}
	for i, b := range mr.Content {
		if b.Type != "tool_use" {
			continue
		}
		call := ToolCall{ID: b.ID, Name: b.Name, Args: b.Input}
		if len(call.Args) == 0 || string(call.Args) == "null" {
			call.Args = json.RawMessage(`{}`)
		}
		if call.ID == "" {
			// The tool_result must name its call.
			call.ID = "toolu_" + strconv.Itoa(i)
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	switch mr.StopReason {
	case "end_turn", "stop_sequence", "pause_turn":
		out.Finish = FinishStop
	case "tool_use":
		out.Finish = FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		out.Finish = FinishLength
	case "refusal":
		out.Finish = FinishRefusal
		out.Refusal = out.Content
		if out.Refusal == "" {
			out.Refusal = "the model refused (stop_reason refusal)"
		}
	default:
		out.Finish = FinishStop
	}
	if out.Finish == FinishStop && len(out.ToolCalls) > 0 {
		out.Finish = FinishToolCalls
	}
	u := mr.Usage
	in, outTok, write, read := val(u.InputTokens), val(u.OutputTokens), val(u.CacheCreationInputTokens), val(u.CacheReadInputTokens)
	sane := func(n int64) bool { return n >= 0 && n <= maxReportedTokens }
	if sane(in) && sane(outTok) && sane(write) && sane(read) && in+outTok+write+read > 0 {
		out.Usage = messageUsage(in, outTok, write, read)
	} else {
		// A server that reports no usage (or nonsense) is still held to the
		// token budget: count it the way the builtin models do.
		text := out.Content
		for _, tc := range out.ToolCalls {
			text += tc.Name + string(tc.Args)
		}
		out.Usage = messageUsage(requestTokens(req), estimateTokens(text), 0, 0)
	}
	return out
}

// messageUsage is the usage of a message's counts: TokensIn is every input token,
// the cache's included.
func messageUsage(in, out, cacheWrite, cacheRead int64) api.Usage {
	return api.Usage{TokensIn: in + cacheWrite + cacheRead, TokensOut: out, CacheWriteTokens: cacheWrite, CacheReadTokens: cacheRead}
}

// maxReportedTokens bounds a count a server reports: a larger one is
// nonsense (and four of them could overflow a sum).
const maxReportedTokens = 1 << 50

// val is *p, or 0 for nil.
func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
