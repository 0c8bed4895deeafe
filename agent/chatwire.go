package agent

import "encoding/json"

// The Chat Completions wire types: the subset of OpenAI's API agentd sends
// and reads, which vLLM, Ollama, llama.cpp's server and the common gateways
// implement. Unknown response fields are ignored.

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []chatTool    `json:"tools,omitempty"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

func textContent(s string) *string { return &s }

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatFunctionCall `json:"function"`
}

type chatFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatResponse struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   chatContent    `json:"content"`
			Refusal   string         `json:"refusal"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// chatContent is a message's content: a string, null, or (some servers) an
// array of parts whose text parts are joined.
type chatContent struct{ s string }

func (c chatContent) text() string { return c.s }

// UnmarshalJSON accepts a string, null, or an array of {type, text} parts.
func (c *chatContent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		c.s = ""
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
	c.s = ""
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			c.s += p.Text
		}
	}
	return nil
}
