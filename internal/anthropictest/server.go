// Package anthropictest is a server for tests that speaks Anthropic's
// Messages API (POST /v1/messages) on 127.0.0.1, answers scripted per
// request, whole or streamed as server-sent events, and holds every request
// to the official Go SDK's own types (github.com/anthropics/anthropic-sdk-go):
// a body is decoded into anthropic.MessageNewParams and encoded again, and
// a field the SDK does not know, or a value it would send otherwise, is a
// mismatch the test sees in Err. Only tests import it, so the SDK is a test
// dependency and never linked into agentd.
package anthropictest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"

	"github.com/anthropics/anthropic-sdk-go"
)

// Request is one request as the server saw it.
type Request struct {
	Path   string
	Header http.Header
	Raw    []byte                     // the body as sent
	Params anthropic.MessageNewParams // the body decoded by the SDK
	Stream bool                       // the body asked for a stream
	// Done is closed when the client goes away (the request's context).
	Done <-chan struct{}
}

// Step answers one request.
type Step func(w http.ResponseWriter, r *Request)

// Server is a scripted Messages server: the nth request is answered by the
// nth step. It is safe for concurrent use.
type Server struct {
	*httptest.Server

	mu     sync.Mutex // guards script, reqs, errs
	script []Step
	reqs   []Request
	errs   []error
}

// NewServer starts a server on 127.0.0.1 playing script; Close it when
// done.
func NewServer(script ...Step) *Server {
	s := &Server{script: script}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("anthropictest: listen: %v", err))
	}
	s.Listener = ln
	s.Start()
	return s
}

// BaseURL is the URL agentd is pointed at: the one before /messages.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Err returns what was wrong with the requests seen: a path or header the
// API would refuse, a body the SDK's types do not hold as sent, a request
// past the script.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

func (s *Server) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	b, _ := io.ReadAll(hr.Body)
	r := Request{Path: hr.URL.Path, Header: hr.Header.Clone(), Raw: b, Done: hr.Context().Done()}
	if err := Check(hr, b, &r); err != nil {
		s.fail(err)
	}
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, r)
	var step Step
	if n < len(s.script) {
		step = s.script[n]
	}
	s.mu.Unlock()
	if step == nil {
		s.fail(fmt.Errorf("anthropictest: unscripted request %d", n+1))
		Error(http.StatusInternalServerError, "api_error", "unscripted")(w, &r)
		return
	}
	step(w, &r)
}

// Check holds a request to the API: POST to a path ending in /v1/messages,
// an anthropic-version header, a JSON body that the SDK's
// MessageNewParams decodes and encodes to the same JSON (no field it does
// not know, no value it would send otherwise; the API's string shorthands,
// such as a system prompt or a tool result's content as a string, count as
// the text block the SDK reads them as), with a model, a positive
// max_tokens and at least one message. It fills r's Params and Stream.
func Check(hr *http.Request, body []byte, r *Request) error {
	var errs []error
	if hr.Method != http.MethodPost || !strings.HasSuffix(hr.URL.Path, "/v1/messages") {
		errs = append(errs, fmt.Errorf("anthropictest: %s %s, want POST .../v1/messages", hr.Method, hr.URL.Path))
	}
	if hr.Header.Get("Anthropic-Version") == "" {
		errs = append(errs, errors.New("anthropictest: no anthropic-version header"))
	}
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil {
		return errors.Join(append(errs, fmt.Errorf("anthropictest: body is not a JSON object: %v", err))...)
	}
	stream, _ := sent["stream"].(bool)
	r.Stream = stream
	delete(sent, "stream") // a parameter of the SDK's call, not of its params type
	expandShorthands(sent)
	if err := json.Unmarshal(body, &r.Params); err != nil {
		return errors.Join(append(errs, fmt.Errorf("anthropictest: the SDK does not decode the body: %v", err))...)
	}
	again, err := json.Marshal(r.Params)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("anthropictest: the SDK does not encode the body again: %v", err))...)
	}
	var sdk map[string]any
	if err := json.Unmarshal(again, &sdk); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if !reflect.DeepEqual(sent, sdk) {
		errs = append(errs, fmt.Errorf("anthropictest: the body is not what the SDK's types hold:\nsent: %s\nSDK:  %s", canonical(sent), canonical(sdk)))
	}
	if r.Params.Model == "" || r.Params.MaxTokens <= 0 || len(r.Params.Messages) == 0 {
		errs = append(errs, fmt.Errorf("anthropictest: model %q, max_tokens %d, %d messages: want all three", r.Params.Model, r.Params.MaxTokens, len(r.Params.Messages)))
	}
	return errors.Join(errs...)
}

// expandShorthands rewrites the API's string shorthands in a request body
// as the one text block each stands for, as the SDK's types read them: the
// system prompt, a message's content, a tool result's content.
func expandShorthands(body map[string]any) {
	text := func(v any) any {
		if s, ok := v.(string); ok {
			return []any{map[string]any{"type": "text", "text": s}}
		}
		return v
	}
	if v, ok := body["system"]; ok {
		body["system"] = text(v)
	}
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		msg, _ := m.(map[string]any)
		if msg == nil {
			continue
		}
		if v, ok := msg["content"]; ok {
			msg["content"] = text(v)
		}
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			if block, _ := b.(map[string]any); block != nil && block["type"] == "tool_result" {
				if v, ok := block["content"]; ok {
					block["content"] = text(v)
				}
			}
		}
	}
}

func canonical(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Block is a content block of a scripted answer.
type Block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Text is a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// ToolUse is a tool_use block; input is its JSON, sent as written (in a
// stream, in input_json_delta fragments).
func ToolUse(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

// Usage is a scripted answer's token counts.
type Usage struct {
	Input, Output, CacheWrite, CacheRead int64
}

// Message answers with a message of blocks that stopped for stop: whole, or
// as a stream of events (text and tool input in chunks of at most three
// bytes) when the request asked for one.
func Message(stop string, u Usage, blocks ...Block) Step {
	return func(w http.ResponseWriter, r *Request) {
		if r.Stream {
			WriteStream(w, StreamEvents(stop, u, 3, blocks...)...)
			return
		}
		content := make([]any, len(blocks))
		for i, b := range blocks {
			if b.Type == "text" {
				content[i] = map[string]any{"type": "text", "text": b.Text}
			} else {
				content[i] = b
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_test", "type": "message", "role": "assistant", "model": modelOf(r),
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": u.Input, "output_tokens": u.Output,
				"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead},
		})
	}
}

func modelOf(r *Request) string {
	if r == nil {
		return "test-model"
	}
	return string(r.Params.Model)
}

// Event is one server-sent event: its name and its data.
type Event struct {
	Name string
	Data string
}

// Ev is an event whose data is v encoded; its name is v's "type".
func Ev(v map[string]any) Event {
	b, _ := json.Marshal(v)
	name, _ := v["type"].(string)
	return Event{Name: name, Data: string(b)}
}

// StreamEvents is the stream of a message as the API sends it: message_start
// (input usage), ping, each block's start, deltas of at most chunk bytes
// (chunk <= 0: one delta) and stop, message_delta (stop reason, output
// usage) and message_stop.
func StreamEvents(stop string, u Usage, chunk int, blocks ...Block) []Event {
	evs := []Event{Ev(map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": "test-model", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "output_tokens": 1,
			"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead}}}),
		Ev(map[string]any{"type": "ping"})}
	for i, b := range blocks {
		switch b.Type {
		case "text":
			evs = append(evs, Ev(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}}))
			for _, part := range chunks(b.Text, chunk) {
				evs = append(evs, Ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}}))
			}
		case "tool_use":
			evs = append(evs, Ev(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}}))
			for _, part := range chunks(string(b.Input), chunk) {
				evs = append(evs, Ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}}))
			}
		}
		evs = append(evs, Ev(map[string]any{"type": "content_block_stop", "index": i}))
	}
	return append(evs,
		Ev(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": u.Output}}),
		Ev(map[string]any{"type": "message_stop"}))
}

// chunks splits s into pieces of at most n bytes (one piece when n <= 0,
// none when s is empty).
func chunks(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 0 {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// Stream answers with these events, flushed one by one, and ends the
// response (whether or not they end the message: a stream cut short is one
// without message_stop).
func Stream(evs ...Event) Step {
	return func(w http.ResponseWriter, r *Request) { WriteStream(w, evs...) }
}

// WriteStream writes evs as a text/event-stream answer, flushing each.
func WriteStream(w http.ResponseWriter, evs ...Event) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	for _, ev := range evs {
		var b bytes.Buffer
		if ev.Name != "" {
			fmt.Fprintf(&b, "event: %s\n", ev.Name)
		}
		fmt.Fprintf(&b, "data: %s\n\n", ev.Data)
		w.Write(b.Bytes())
		if f != nil {
			f.Flush()
		}
	}
}

// Encode is evs as the bytes of a stream.
func Encode(evs ...Event) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		if ev.Name != "" {
			fmt.Fprintf(&b, "event: %s\n", ev.Name)
		}
		fmt.Fprintf(&b, "data: %s\n\n", ev.Data)
	}
	return b.Bytes()
}

// Hang never answers; it returns when the client goes away.
func Hang(w http.ResponseWriter, r *Request) { <-r.Done }

// StreamThenHang sends evs and then nothing more, holding the stream open
// until the client goes away.
func StreamThenHang(evs ...Event) Step {
	return func(w http.ResponseWriter, r *Request) {
		WriteStream(w, evs...)
		<-r.Done
	}
}

// Error answers with an API error: status code, the error's type and
// message in the API's shape, and header pairs (such as "Retry-After",
// "0.01").
func Error(code int, typ, message string, header ...string) Step {
	return func(w http.ResponseWriter, r *Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}, "request_id": "req_test"})
	}
}

// Raw answers with status code, the media type and body given.
func Raw(code int, mediaType, body string) Step {
	return func(w http.ResponseWriter, r *Request) {
		if mediaType != "" {
			w.Header().Set("Content-Type", mediaType)
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}
