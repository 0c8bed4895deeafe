package intelligence

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// What OpenAI-compatible servers send besides OpenAI's own shapes: error
// bodies in other shapes (the content as an array of parts is chatContent's),
// and a bound on what is read into memory.

// maxResponseBytes bounds a model answer read into memory.
const maxResponseBytes = 32 << 20

// maxErrorBytes bounds an error answer read into memory; only its message is
// kept.
const maxErrorBytes = 1 << 20

// errorMessage extracts the message of an error body: {"error":{"message":..}}
// (OpenAI, vLLM), {"error":".."} (Ollama), or {"message":".."}; at most 300
// bytes of it. A body in no such shape (an HTML page from a proxy) has none.
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

// readAnswer reads a 2xx answer's body whole: into one slice of its length
// when the server said it (Content-Length), else with io.ReadAll (growing
// buffers, then one of the answer's length: about twice the answer
// allocated, which a child waiting on its next call keeps, as it did for
// every answer); an answer over maxResponseBytes is an error either way.
func readAnswer(resp *http.Response) ([]byte, error) {
	body := &limitedBody{rc: resp.Body, left: maxResponseBytes}
	n := resp.ContentLength
	if n < 0 || n > maxResponseBytes {
		return io.ReadAll(body)
	}
	b := make([]byte, n)
	// net/http's body ends at the Content-Length, and is an
	// io.ErrUnexpectedEOF if the connection ends before it.
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	return b, nil
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
