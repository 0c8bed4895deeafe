package intelligence

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
)

// The Chat Completions wire types: the part of OpenAI's API agentd sends and
// reads, which vLLM, Ollama, llama.cpp's server and the common gateways also
// speak. Fields of an answer that agentd does not use are not decoded.

// chatRequest is the body of POST {base}/chat/completions.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []chatTool    `json:"tools,omitempty"`
	// Stream asks for the answer as server-sent events (stream.go), with
	// the usage in a last chunk of its own.
	Stream        bool               `json:"stream,omitempty"`
	StreamOptions *chatStreamOptions `json:"stream_options,omitempty"`
	// toolsJSON, when set, is Tools encoded (the model's toolsCache),
	// written in their place.
	toolsJSON []byte
}

// chatBody is cr's JSON body, as json.Marshal writes it, with the
// conversation's turns and tool arguments by reference (jsonBody).
func chatBody(cr *chatRequest) (*jsonBody, error) {
	b := &jsonBody{}
	b.raw(`{"model":`)
	b.str(cr.Model)
	b.raw(`,"messages":`)
	if cr.Messages == nil {
		b.raw("null")
	} else {
		b.raw("[")
	}
	for i, m := range cr.Messages {
		if i > 0 {
			b.raw(",")
		}
		b.raw(`{"role":`)
		b.str(m.Role)
		if m.Content != nil {
			b.raw(`,"content":`)
			b.str(*m.Content)
		}
		if len(m.ToolCalls) > 0 {
			b.raw(`,"tool_calls":[`)
			for j, tc := range m.ToolCalls {
				if j > 0 {
					b.raw(",")
				}
				b.raw(`{"id":`)
				b.str(tc.ID)
				b.raw(`,"type":`)
				b.str(tc.Type)
				b.raw(`,"function":{"name":`)
				b.str(tc.Function.Name)
				b.raw(`,"arguments":`)
				b.bytes(tc.Function.Arguments)
				b.raw("}")
				if tc.Custom != nil {
					b.raw(`,"custom":{"name":`)
					b.str(tc.Custom.Name)
					b.raw(`,"input":`)
					b.str(tc.Custom.Input)
					b.raw("}")
				}
				b.raw("}")
			}
			b.raw("]")
		}
		if m.ToolCallID != "" {
			b.raw(`,"tool_call_id":`)
			b.str(m.ToolCallID)
		}
		b.raw("}")
	}
	if cr.Messages != nil {
		b.raw("]")
	}
	switch {
	case cr.toolsJSON != nil:
		b.raw(`,"tools":`)
		b.ref(cr.toolsJSON)
	case len(cr.Tools) > 0:
		enc, err := chatToolsJSON(cr.Tools)
		if err != nil {
			return nil, err
		}
		b.raw(`,"tools":`)
		b.ref(enc)
	}
	if cr.Stream {
		b.raw(`,"stream":true`)
	}
	if cr.StreamOptions != nil {
		b.raw(`,"stream_options":{"include_usage":` + strconv.FormatBool(cr.StreamOptions.IncludeUsage) + "}")
	}
	b.raw("}")
	return b.done(), nil
}

// chatToolsJSON is tools as json.Marshal writes them, in a slice of
// their length. A tool's parameters that are not valid JSON are an error.
func chatToolsJSON(tools []chatTool) ([]byte, error) {
	for _, t := range tools {
		if err := checkJSON(t.Function.Parameters); err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", t.Function.Name, err)
		}
	}
	return encodeJSON(func(w jsonOut) {
		w.raw("[")
		for i, t := range tools {
			if i > 0 {
				w.raw(",")
			}
			w.raw(`{"type":`)
			w.str(t.Type)
			w.raw(`,"function":{"name":`)
			w.str(t.Function.Name)
			if t.Function.Description != "" {
				w.raw(`,"description":`)
				w.str(t.Function.Description)
			}
			w.raw(`,"parameters":`)
			w.json(t.Function.Parameters)
			w.raw("}}")
		}
		w.raw("]")
	}), nil
}

type chatStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one turn of the conversation sent. Content is omitted (not
// null) for an assistant turn that only calls tools.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// chatToolCall is a tool call, in an assistant turn sent back and in an
// answer. An answer's call is a function call ("function") or, from
// OpenAI's custom tools, a call with free-form input ("custom").
type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatFunctionCall `json:"function"`
	Custom   *chatCustomCall  `json:"custom,omitempty"`
}

type chatFunctionCall struct {
	Name      string   `json:"name"`
	Arguments chatArgs `json:"arguments"`
}

// chatArgs is a tool call's arguments: JSON text, which the API carries as
// a JSON string. It is held in bytes, as the loop holds them
// (ToolCall.Args): a call sent back refers to them rather than copying
// them into a string, and an answer's are unquoted once, into a slice of
// their length, which becomes the ToolCall's (encoding/json would unquote
// them into a buffer, copy that into a string, and the string into the
// ToolCall: 18 KiB three times for figure 9's call).
type chatArgs []byte

// MarshalJSON writes a as the JSON string of its text.
func (a chatArgs) MarshalJSON() ([]byte, error) { return json.Marshal(string(a)) }

// UnmarshalJSON reads a JSON string into a as encoding/json reads one into
// a string (null leaves a as it is).
func (a *chatArgs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[string]()}
	}
	s := b[1 : len(b)-1]
	n, ok := unquotedLen(s)
	if !ok {
		return fmt.Errorf("tool call arguments: invalid JSON string %.40q", b)
	}
	*a = appendUnquoted(make(chatArgs, 0, n), s)
	return nil
}

// jsonKind names the kind of JSON value b starts with, as
// json.UnmarshalTypeError does.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "value"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

type chatCustomCall struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

// chatTool offers one function to the model.
type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"` // sent as written: its numbers are not rounded
}

// chatResponse is what agentd reads of a completion.
type chatResponse struct {
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
}

type chatChoice struct {
	FinishReason string `json:"finish_reason"`
	Message      struct {
		Content   chatContent    `json:"content"`
		Refusal   string         `json:"refusal"`
		ToolCalls []chatToolCall `json:"tool_calls"`
	} `json:"message"`
}

type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// chatContent is a message's content: a string, null, or (from some servers)
// an array of parts, whose text parts are joined.
type chatContent struct{ s string }

func (c chatContent) text() string { return c.s }

// UnmarshalJSON accepts a string, null, or an array of {type, text} parts
// (parts of other types, such as images, are skipped).
func (c *chatContent) UnmarshalJSON(b []byte) error {
	c.s = ""
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.s)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			c.s += p.Text
		}
	}
	return nil
}
