package intelligence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// A Messages stream: server-sent events, each a JSON object whose type
// names it (and which the event field repeats): message_start, then per
// content block content_block_start, content_block_delta... and
// content_block_stop, then message_delta (the stop reason, the final
// usage) and message_stop; ping at any time, and error, which ends the
// stream. readMessageStream assembles them into the message a non-streamed
// answer would have been.

// streamError is an error event of a stream: the error the server met after
// its 200 answer began, such as overloaded_error.
type streamError struct {
	typ     string
	message string
}

func (e *streamError) Error() string {
	s := "the stream ended with an error event"
	if e.typ != "" {
		s += ": " + e.typ
	}
	if e.message != "" {
		s += ": " + e.message
	}
	return s
}

// retryable reports whether the error is the server's passing trouble
// (overloaded, rate limited, an internal error or timeout) rather than a
// refusal of the request.
func (e *streamError) retryable() bool {
	switch e.typ {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}

// sseReader reads server-sent events: lines of "field: value", an event
// ending at a blank line. It keeps the event and data fields (data lines
// joined by newlines) and skips comments and other fields. Lines end in
// LF, CRLF or CR.
type sseReader struct {
	r *bufio.Reader
}

// next returns the next event with data, io.EOF at the end of a stream
// that ended between events, or io.ErrUnexpectedEOF for one cut inside an
// event.
func (s *sseReader) next() (event string, data []byte, err error) {
	var buf bytes.Buffer
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			if err == io.EOF && (hasData || event != "") {
				return "", nil, io.ErrUnexpectedEOF
			}
			return "", nil, err
		}
		if len(line) == 0 {
			if hasData {
				return event, buf.Bytes(), nil
			}
			event = "" // an event without data is dispatched as nothing
			continue
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if hasData {
				buf.WriteByte('\n')
			}
			if buf.Len()+len(value) > maxEventBytes {
				return "", nil, fmt.Errorf("stream event over %d bytes", maxEventBytes)
			}
			buf.Write(value)
			hasData = true
		}
	}
}

// line reads one line without its end, bounded by maxEventBytes.
func (s *sseReader) line() ([]byte, error) {
	var line []byte
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF // a line cut before its end
			}
			return nil, err
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			if next, err := s.r.Peek(1); err == nil && next[0] == '\n' {
				s.r.ReadByte()
			}
			return line, nil
		}
		if len(line) >= maxEventBytes {
			return nil, fmt.Errorf("stream line over %d bytes", maxEventBytes)
		}
		line = append(line, b)
	}
}

// streamEvent is one event's data, the fields of every type together.
type streamEvent struct {
	Type         string           `json:"type"`
	Message      *msgResponse     `json:"message"`       // message_start
	Index        *int             `json:"index"`         // content_block_*
	ContentBlock *msgContentBlock `json:"content_block"` // content_block_start
	Delta        struct {
		Type        string `json:"type"`         // content_block_delta: text_delta, input_json_delta, ...
		Text        string `json:"text"`         // text_delta
		PartialJSON string `json:"partial_json"` // input_json_delta
		StopReason  string `json:"stop_reason"`  // message_delta
	} `json:"delta"`
	Usage *msgUsage `json:"usage"` // message_delta
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"` // error
}

// readMessageStream reads a Messages stream to its message_stop and returns
// the message it carried; each text delta reaches onText (if set) as it is
// read. A tool_use block's input is its input_json_delta fragments joined
// (its start's input when there are none). A stream that ends early, an
// error event, an event out of order or that is not JSON is an error.
func readMessageStream(r io.Reader, onText func(string)) (*msgResponse, error) {
	sr := &sseReader{r: bufio.NewReader(r)}
	var (
		mr      *msgResponse
		partial = map[int]*bytes.Buffer{} // a tool_use block's input so far, by index
		open    = map[int]bool{}          // blocks started and not stopped
	)
	for {
		name, data, err := sr.next()
		if err != nil {
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
				// Retried like a connection cut mid-answer.
				return nil, fmt.Errorf("the stream ended before message_stop: %w", io.ErrUnexpectedEOF)
			}
			return nil, fmt.Errorf("read stream: %w", err)
		}
		var ev streamEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("decode stream event %q: %w", clip(name), err)
		}
		if ev.Type == "" {
			ev.Type = name
		}
		if ev.Type != "message_start" && ev.Type != "ping" && ev.Type != "error" && mr == nil {
			return nil, fmt.Errorf("decode stream: %s before message_start", clip(ev.Type))
		}
		switch ev.Type {
		case "ping":
		case "error":
			se := &streamError{}
			if ev.Error != nil {
				se.typ, se.message = clip(ev.Error.Type), clip(ev.Error.Message)
			}
			return nil, se
		case "message_start":
			if mr != nil {
				return nil, errors.New("decode stream: a second message_start")
			}
			if ev.Message == nil {
				return nil, errors.New("decode stream: message_start without a message")
			}
			mr = ev.Message
			mr.Content = nil // blocks arrive by content_block_start
		case "content_block_start":
			if ev.Index == nil || *ev.Index != len(mr.Content) || ev.ContentBlock == nil {
				return nil, fmt.Errorf("decode stream: content_block_start out of order (index %s, %d blocks so far)", indexText(ev.Index), len(mr.Content))
			}
			b := *ev.ContentBlock
			mr.Content = append(mr.Content, b)
			open[*ev.Index] = true
			if b.Type == "text" && b.Text != "" && onText != nil {
				onText(b.Text)
			}
		case "content_block_delta":
			if ev.Index == nil || !open[*ev.Index] {
				return nil, fmt.Errorf("decode stream: content_block_delta for block %s, which is not open", indexText(ev.Index))
			}
			b := &mr.Content[*ev.Index]
			switch ev.Delta.Type {
			case "text_delta":
				if b.Type != "text" {
					return nil, fmt.Errorf("decode stream: text_delta for a %s block", clip(b.Type))
				}
				b.Text += ev.Delta.Text
				if ev.Delta.Text != "" && onText != nil {
					onText(ev.Delta.Text)
				}
			case "input_json_delta":
				if b.Type != "tool_use" {
					return nil, fmt.Errorf("decode stream: input_json_delta for a %s block", clip(b.Type))
				}
				p := partial[*ev.Index]
				if p == nil {
					p = &bytes.Buffer{}
					partial[*ev.Index] = p
				}
				p.WriteString(ev.Delta.PartialJSON)
			}
			// Other deltas (thinking, signatures, citations) are not kept.
		case "content_block_stop":
			if ev.Index == nil || !open[*ev.Index] {
				return nil, fmt.Errorf("decode stream: content_block_stop for block %s, which is not open", indexText(ev.Index))
			}
			delete(open, *ev.Index)
			if p := partial[*ev.Index]; p != nil && p.Len() > 0 {
				mr.Content[*ev.Index].Input = json.RawMessage(p.String())
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				mr.StopReason = ev.Delta.StopReason
			}
			if ev.Usage != nil {
				mr.Usage.merge(*ev.Usage)
			}
		case "message_stop":
			if len(open) > 0 {
				return nil, fmt.Errorf("decode stream: message_stop with %d content blocks still open", len(open))
			}
			return mr, nil
		}
		// Event types this reader does not know are skipped, as the API asks
		// of its clients.
	}
}

// indexText is a block index for an error, or "none".
func indexText(i *int) string {
	if i == nil {
		return "none"
	}
	return fmt.Sprint(*i)
}
