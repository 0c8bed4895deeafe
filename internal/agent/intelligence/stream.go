package intelligence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Chat Completions streaming: with "stream": true the endpoint answers with
// server-sent events, each a chunk whose choices carry deltas (text in
// delta.content, tool calls in delta.tool_calls, each call's pieces keyed by
// its index), the finish reason on the last delta, and (asked for with
// stream_options.include_usage) the usage in a chunk of its own with no
// choices; "data: [DONE]" ends the stream. The chunks are assembled into the
// chatResponse a non-streamed answer would have been, so both paths end in
// convertCompletion.

// ErrStreamCut is wrapped by the error of a streamed answer that ended before
// it was finished: the connection closed (or the server stopped) after some
// chunks, with neither a finish reason nor [DONE].
var ErrStreamCut = errors.New("intelligence: the model's stream ended before its answer was finished")

// streamEventError is an error event in a Chat Completions stream: the
// server failed after its 200 answer began (failover counts it as a server
// error).
type streamEventError struct{ message string }

func (e *streamEventError) Error() string {
	return "the model's stream reported an error: " + e.message
}

// maxEventBytes bounds one server-sent event (a line of it, or its data).
const maxEventBytes = 4 << 20

// chatChunk is one streamed chunk.
type chatChunk struct {
	Choices []struct {
		Index        int    `json:"index"`
		FinishReason string `json:"finish_reason"`
		Delta        struct {
			Content   chatContent     `json:"content"`
			Refusal   string          `json:"refusal"`
			ToolCalls []chatToolDelta `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"` // a failure reported in the stream
}

// chatToolDelta is a piece of a streamed tool call: the first piece of a
// call has its id, type and name, the later ones more of its arguments.
type chatToolDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// readStream reads a streamed answer from body, calling onText with each
// piece of text of the first choice as it arrives, and returns the assembled
// answer. A stream that ends without [DONE] and without a finish reason is
// ErrStreamCut; an error event in the stream is an error naming its message.
func readStream(body io.Reader, onText func(string)) (*chatResponse, error) {
	r := bufio.NewReaderSize(body, 64<<10)
	var (
		cr       chatResponse
		content  strings.Builder
		calls    []chatToolCall // by index
		finished bool
		data     []byte
		n        int // chunks read
	)
	cr.Choices = make([]chatChoice, 1)
	ch := &cr.Choices[0]
	apply := func(b []byte) (done bool, err error) {
		if string(bytes.TrimSpace(b)) == "[DONE]" {
			return true, nil
		}
		var c chatChunk
		if err := json.Unmarshal(b, &c); err != nil {
			return false, fmt.Errorf("decode stream chunk %d: %w", n+1, err)
		}
		n++
		if len(c.Error) > 0 && string(c.Error) != "null" {
			msg := errorMessage(append(append([]byte(`{"error":`), c.Error...), '}'))
			if msg == "" {
				msg = clip(string(c.Error))
			}
			return false, &streamEventError{message: msg}
		}
		if c.Usage != nil {
			cr.Usage = c.Usage
		}
		for _, choice := range c.Choices {
			if choice.Index != 0 {
				continue // one choice is asked for; others are not read
			}
			if t := choice.Delta.Content.text(); t != "" {
				content.WriteString(t)
				if onText != nil {
					onText(t)
				}
			}
			ch.Message.Refusal += choice.Delta.Refusal
			for _, d := range choice.Delta.ToolCalls {
				if d.Index < 0 || d.Index > 1024 {
					return false, fmt.Errorf("stream chunk %d: tool call index %d", n, d.Index)
				}
				if d.Index >= len(calls) {
					calls = slices.Grow(calls, d.Index+1-len(calls))[:d.Index+1]
				}
				tc := &calls[d.Index]
				if d.ID != "" {
					tc.ID = d.ID
				}
				if d.Type != "" {
					tc.Type = d.Type
				}
				tc.Function.Name += d.Function.Name
				tc.Function.Arguments = append(tc.Function.Arguments, d.Function.Arguments...)
			}
			if choice.FinishReason != "" {
				ch.FinishReason = choice.FinishReason
				finished = true
			}
		}
		return false, nil
	}
read:
	for {
		line, err := readLine(r)
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = nil // the last line, without its line ending: EOF comes next
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				if n > 0 {
					return nil, fmt.Errorf("%w (after %d chunks): %w", ErrStreamCut, n, err)
				}
				return nil, err
			}
			// The last event may lack its blank line.
			if len(data) > 0 {
				done, aerr := apply(data)
				if aerr != nil {
					return nil, aerr
				}
				if done {
					break read
				}
			}
			if finished {
				break read // a server that sends no [DONE]
			}
			return nil, fmt.Errorf("%w (after %d chunks)", ErrStreamCut, n)
		}
		switch {
		case len(line) == 0: // the end of an event
			if len(data) == 0 {
				continue
			}
			done, aerr := apply(data)
			data = data[:0]
			if aerr != nil {
				return nil, aerr
			}
			if done {
				break read
			}
		case line[0] == ':': // a comment (a keep-alive)
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) != "data" {
				continue // event, id, retry: not used
			}
			if len(data) > 0 {
				data = append(data, '\n')
			}
			if len(data)+len(value) > maxEventBytes {
				return nil, fmt.Errorf("stream event over %d bytes", maxEventBytes)
			}
			data = append(data, value...)
		}
	}
	ch.Message.Content = chatContent{s: content.String()}
	for i := range calls {
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
	ch.Message.ToolCalls = calls
	return &cr, nil
}

// readLine reads one line of an event stream without its line ending (LF,
// CRLF or CR-less LF); a line over maxEventBytes is an error.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxEventBytes {
			return nil, fmt.Errorf("stream line over %d bytes", maxEventBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
}
