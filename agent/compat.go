package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// What OpenAI-compatible servers send that the SDK does not read as agentd
// needs: error bodies in other shapes, content as an array of parts, JSON
// answers under another media type; and a bound on what is read into memory.

// maxResponseBytes bounds a model answer read into memory.
const maxResponseBytes = 32 << 20

// maxErrorBytes bounds an error answer read into memory; only its message is
// kept.
const maxErrorBytes = 1 << 20

// compatMiddleware is an option.Middleware run on every attempt. It bounds a
// successful answer at maxResponseBytes and has the SDK decode it as JSON
// whatever its Content-Type; and it rewrites an error answer that is not
// OpenAI's {"error":{...}} (Ollama's {"error":"..."}, {"message":"..."}, an
// HTML page from a proxy) into that shape with the message found, because the
// SDK fails on an "error" that is not an object and would lose the status.
func compatMiddleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err != nil || resp == nil || resp.Body == nil {
		return resp, err
	}
	if resp.StatusCode < 400 {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			resp.Header.Set("Content-Type", "application/json")
		}
		resp.Body = &limitedBody{rc: resp.Body, left: maxResponseBytes}
		return resp, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read error answer %d: %w", resp.StatusCode, err)
	}
	b = openAIErrorBody(b)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// openAIErrorBody returns b if its "error" is an object, as OpenAI sends it,
// else {"error":{"message":M}} with the message errorMessage finds in b.
func openAIErrorBody(b []byte) []byte {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 && body.Error[0] == '{' {
		return b
	}
	out, _ := json.Marshal(map[string]map[string]string{"error": {"message": errorMessage(b)}})
	return out
}

// errorMessage extracts the message of an error body: {"error":{"message":..}}
// (OpenAI, vLLM), {"error":".."} (Ollama), or {"message":".."}; at most 300
// bytes of it.
func errorMessage(b []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &body) != nil {
		return ""
	}
	msg := body.Message
	var obj struct {
		Message string `json:"message"`
	}
	var str string
	if json.Unmarshal(body.Error, &obj) == nil && obj.Message != "" {
		msg = obj.Message
	} else if json.Unmarshal(body.Error, &str) == nil && str != "" {
		msg = str
	}
	return clip(msg)
}

// clip shortens a provider's message to 300 bytes.
func clip(msg string) string {
	if len(msg) > 300 {
		return msg[:300] + "..."
	}
	return msg
}

// limitedBody fails a read past left bytes, so that an oversized answer is an
// error rather than a truncated one.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// The bound is reached: one more byte means the answer is over it.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("answer over %d bytes", maxResponseBytes)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// messageText is a message's content: the string the SDK decoded, or, when a
// server sent an array of parts (which the SDK leaves as raw JSON), its text
// parts joined.
func messageText(msg openai.ChatCompletionMessage) string {
	raw := msg.JSON.Content.Raw()
	if !strings.HasPrefix(raw, "[") {
		return msg.Content
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal([]byte(raw), &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
