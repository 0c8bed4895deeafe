// Package a2acall is agentd's A2A client: the JSON-RPC calls of A2A 0.3 that
// agentd makes to another agent (message/send, message/stream, tasks/get,
// tasks/cancel, tasks/resubscribe, the push config methods), each one HTTP
// POST over the caller's http.Client, the answers decoded into a2a-go's
// types; and the same calls in A2A 1.0 (ClientV1).
//
// a2a-go's own client (a2aclient) does the same over JSON-RPC, but the
// package also holds its gRPC transport, which agentd never uses: linking it
// linked a2a-go's protobuf types, genproto's annotations and descriptorpb into
// every agentd process and ran their package init in every subagent (about
// 5% of a cold child's CPU; docs/dependencies.md). This package uses a2a-go's
// types and its event decoding (a2a.UnmarshalEventJSON), nothing of its
// transport.
package a2acall

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/a2a"
)

// MaxAnswer bounds one answer: a JSON-RPC response body, or one event of a
// stream. A bigger one is an error (ErrTooLarge), not a truncated task.
const MaxAnswer = 64 << 20

// maxAnswer is MaxAnswer, lowered by the tests.
var maxAnswer = MaxAnswer

// ErrTooLarge is the error of an answer over MaxAnswer.
var ErrTooLarge = errors.New("a2acall: answer over the size limit")

// JSON-RPC method names of A2A 0.3.
const (
	MethodSend        = "message/send"
	MethodStream      = "message/stream"
	MethodGetTask     = "tasks/get"
	MethodCancelTask  = "tasks/cancel"
	MethodResubscribe = "tasks/resubscribe"
	MethodSetPush     = "tasks/pushNotificationConfig/set"
	MethodGetPush     = "tasks/pushNotificationConfig/get"
	MethodListPush    = "tasks/pushNotificationConfig/list"
	MethodDeletePush  = "tasks/pushNotificationConfig/delete"
)

// Options configure a Client. The zero value sends blocking message/send
// requests and adds no header.
type Options struct {
	// NonBlocking makes SendMessage ask for an answer at once
	// (configuration.blocking false) unless the params say otherwise: the
	// caller follows the task itself.
	NonBlocking bool
	// Header, if set, adds headers to each request from the call's context
	// (a traceparent, say).
	Header func(ctx context.Context, h http.Header)
}

// Client calls one agent's JSON-RPC endpoint. It is safe for concurrent use;
// create it with New.
type Client struct {
	url     string
	hc      *http.Client
	opts    Options
	ids     atomic.Uint64
	version string // the A2A-Version header; "" sends none (0.3's default)
}

// New returns a client of the JSON-RPC endpoint at url over hc
// (http.DefaultClient if nil).
func New(url string, hc *http.Client, opts Options) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{url: url, hc: hc, opts: opts}
}

// Error is a JSON-RPC error the agent answered. It wraps a2a-go's sentinel
// error for the code (a2a.ErrTaskNotFound for -32001, ...), so errors.Is
// works on it; an unknown code wraps none.
type Error struct {
	Method  string
	Code    int
	Message string
	Data    json.RawMessage
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("a2acall: %s: error %d: %s", e.Method, e.Code, e.Message)
	if len(e.Data) > 0 && string(e.Data) != "null" {
		s += " " + string(e.Data)
	}
	return s
}

// HTTPError is an answer whose HTTP status is not 200: the agent did not
// take the request at all (a route or a content type it does not serve, an
// authentication refused, ...).
type HTTPError struct {
	Method string
	Code   int    // the HTTP status code
	Status string // the status line's text, "404 Not Found"
	Body   string // the first 512 bytes of the body, trimmed
}

// Error implements error.
func (e *HTTPError) Error() string {
	return fmt.Sprintf("a2acall: %s: HTTP %s: %s", e.Method, e.Status, e.Body)
}

// Unwrap returns the sentinel error of the code, or nil.
func (e *Error) Unwrap() error { return codeErrors[e.Code] }

// codeErrors are A2A 0.3's JSON-RPC error codes (the specification's section
// 8) and a2a-go's sentinels for them.
var codeErrors = map[int]error{
	-32700: a2a.ErrParseError,
	-32600: a2a.ErrInvalidRequest,
	-32601: a2a.ErrMethodNotFound,
	-32602: a2a.ErrInvalidParams,
	-32603: a2a.ErrInternalError,
	-32000: a2a.ErrServerError,
	-32001: a2a.ErrTaskNotFound,
	-32002: a2a.ErrTaskNotCancelable,
	-32003: a2a.ErrPushNotificationNotSupported,
	-32004: a2a.ErrUnsupportedOperation,
	-32005: a2a.ErrUnsupportedContentType,
	-32006: a2a.ErrInvalidAgentResponse,
	-32007: a2a.ErrAuthenticatedExtendedCardNotConfigured,
	-32008: ErrExtensionRequired,
	-32009: ErrVersionNotSupported,
}

// Errors of A2A 1.0's codes, which a2a-go 0.3 has no sentinel for.
var (
	// ErrVersionNotSupported: the agent does not speak the protocol version
	// it was called with (-32009).
	ErrVersionNotSupported = errors.New("a2acall: the agent does not support this protocol version")
	// ErrExtensionRequired: the agent requires an extension the call did
	// not declare (-32008).
	ErrExtensionRequired = errors.New("a2acall: the agent requires an extension")
)

// request is a JSON-RPC request.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      string `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// response is a JSON-RPC response.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// SendMessage sends message/send and returns the task or the message the
// agent answered.
func (c *Client) SendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	raw, err := c.call(ctx, MethodSend, c.withBlocking(p), false)
	if err != nil {
		return nil, err
	}
	ev, err := a2a.UnmarshalEventJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("a2acall: %s: the result: %w", MethodSend, err)
	}
	switch v := ev.(type) {
	case *a2a.Task:
		return v, nil
	case *a2a.Message:
		return v, nil
	}
	return nil, fmt.Errorf("a2acall: %s: the result is a %T, not a task or a message", MethodSend, ev)
}

// withBlocking returns p with configuration.blocking false when the client
// is NonBlocking and p does not say.
func (c *Client) withBlocking(p *a2a.MessageSendParams) *a2a.MessageSendParams {
	if !c.opts.NonBlocking || (p.Config != nil && p.Config.Blocking != nil) {
		return p
	}
	q := *p
	cfg := a2a.MessageSendConfig{}
	if p.Config != nil {
		cfg = *p.Config
	}
	blocking := false
	cfg.Blocking = &blocking
	q.Config = &cfg
	return &q
}

// resultErr is the error of a result of method that does not decode.
func resultErr(method string, err error) error {
	return fmt.Errorf("a2acall: %s: the result: %w", method, err)
}

// GetTask sends tasks/get.
func (c *Client) GetTask(ctx context.Context, p *a2a.TaskQueryParams) (*a2a.Task, error) {
	return c.task(ctx, MethodGetTask, p)
}

// CancelTask sends tasks/cancel and returns the task as the agent answered.
func (c *Client) CancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	return c.task(ctx, MethodCancelTask, p)
}

// SendStreamingMessage sends message/stream and yields the stream's events
// until it ends, an error (the last yield), or the caller stops.
func (c *Client) SendStreamingMessage(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return c.stream(ctx, MethodStream, p, a2a.UnmarshalEventJSON)
}

// ResubscribeToTask sends tasks/resubscribe and yields the task's events as
// SendStreamingMessage does.
func (c *Client) ResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return c.stream(ctx, MethodResubscribe, p, a2a.UnmarshalEventJSON)
}

func (c *Client) task(ctx context.Context, method string, params any) (*a2a.Task, error) {
	raw, err := c.call(ctx, method, params, false)
	if err != nil {
		return nil, err
	}
	var t a2a.Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("a2acall: %s: the result: %w", method, err)
	}
	return &t, nil
}

// SetTaskPushConfig sends tasks/pushNotificationConfig/set and returns the
// config as the agent stored it.
func (c *Client) SetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	raw, err := c.call(ctx, MethodSetPush, p, false)
	return result[a2a.TaskPushConfig](MethodSetPush, raw, err)
}

// GetTaskPushConfig sends tasks/pushNotificationConfig/get.
func (c *Client) GetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	raw, err := c.call(ctx, MethodGetPush, p, false)
	return result[a2a.TaskPushConfig](MethodGetPush, raw, err)
}

// ListTaskPushConfig sends tasks/pushNotificationConfig/list.
func (c *Client) ListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	raw, err := c.call(ctx, MethodListPush, p, false)
	list, err := result[[]*a2a.TaskPushConfig](MethodListPush, raw, err)
	if err != nil {
		return nil, err
	}
	return *list, nil
}

// DeleteTaskPushConfig sends tasks/pushNotificationConfig/delete.
func (c *Client) DeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	_, err := c.call(ctx, MethodDeletePush, p, true)
	return err
}

// result decodes the result raw of a call to method that answered err.
func result[T any](method string, raw json.RawMessage, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("a2acall: %s: the result: %w", method, err)
	}
	return &out, nil
}

// post sends one request and returns the response once its status is 200.
func (c *Client) post(ctx context.Context, method string, params any, accept string) (*http.Response, string, error) {
	id := strconv.FormatUint(c.ids.Add(1), 10)
	body, err := json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, "", fmt.Errorf("a2acall: %s: encode the params: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, "", fmt.Errorf("a2acall: %s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if c.version != "" {
		req.Header.Set(VersionHeader, c.version)
	}
	if c.opts.Header != nil {
		c.opts.Header(ctx, req.Header)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("a2acall: %s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, "", &HTTPError{Method: method, Code: resp.StatusCode, Status: resp.Status, Body: string(bytes.TrimSpace(snippet))}
	}
	return resp, id, nil
}

// call sends one request and returns its result; with allowEmpty, a null
// or absent result is a nil one, not an error.
func (c *Client) call(ctx context.Context, method string, params any, allowEmpty bool) (json.RawMessage, error) {
	resp, id, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxAnswer)+1))
	if err != nil {
		return nil, fmt.Errorf("a2acall: %s: read the answer: %w", method, err)
	}
	if len(body) > maxAnswer {
		return nil, fmt.Errorf("a2acall: %s: %w (%d bytes)", method, ErrTooLarge, maxAnswer)
	}
	return decode(method, id, body, allowEmpty)
}

// decode reads one JSON-RPC response: its result, or its error as an *Error.
// A response that names another request id is an error (one without an id
// is taken as the request's).
func decode(method, id string, body []byte, allowEmpty bool) (json.RawMessage, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("a2acall: %s: the answer is not a JSON-RPC response: %w", method, err)
	}
	if id != "" && len(r.ID) > 0 && string(r.ID) != "null" {
		var got string
		if json.Unmarshal(r.ID, &got) != nil || got != id {
			if n, err := strconv.ParseUint(string(r.ID), 10, 64); err != nil || strconv.FormatUint(n, 10) != id {
				return nil, fmt.Errorf("a2acall: %s: the answer's id %s is not the request's %q", method, r.ID, id)
			}
		}
	}
	if r.Error != nil {
		return nil, &Error{Method: method, Code: r.Error.Code, Message: r.Error.Message, Data: r.Error.Data}
	}
	if len(r.Result) == 0 || string(r.Result) == "null" {
		if allowEmpty {
			return nil, nil
		}
		return nil, fmt.Errorf("a2acall: %s: the answer has neither a result nor an error", method)
	}
	return r.Result, nil
}

// stream sends one streaming request and yields the events of its
// text/event-stream answer: each event's data is a JSON-RPC response with
// the request's id.
func (c *Client) stream(ctx context.Context, method string, params any, event func([]byte) (a2a.Event, error)) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		resp, id, err := c.post(ctx, method, params, "text/event-stream")
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		for data, err := range events(resp.Body) {
			if err != nil {
				yield(nil, fmt.Errorf("a2acall: %s: the stream: %w", method, err))
				return
			}
			raw, err := decode(method, id, data, false)
			if err != nil {
				yield(nil, err)
				return
			}
			ev, err := event(raw)
			if err != nil {
				yield(nil, fmt.Errorf("a2acall: %s: an event: %w", method, err))
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// events yields the data of each server-sent event of r (its data lines
// joined by newlines), skipping comments, other fields and events without
// data. An event over maxAnswer is ErrTooLarge.
func events(r io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var data []byte
		has := false
		for {
			line, err := readLine(br)
			if err != nil {
				if err == io.EOF {
					if has {
						yield(data, nil)
					}
					return
				}
				yield(nil, err)
				return
			}
			if len(line) == 0 {
				if has && !yield(data, nil) {
					return
				}
				data, has = nil, false
				continue
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) != "data" {
				continue // a comment (": ..."), an event name, an id, a retry
			}
			value = bytes.TrimPrefix(value, []byte(" "))
			if has {
				data = append(data, '\n')
			}
			if len(data)+len(value) > maxAnswer {
				yield(nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, maxAnswer))
				return
			}
			data = append(data, value...)
			has = true
		}
	}
}

// readLine reads one line without its end (\n, \r\n or a lone \r before
// \n), at most maxAnswer bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxAnswer+2 {
			return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, maxAnswer)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return bytes.TrimSuffix(line, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}

// ErrNoJSONRPC is the error of a card that offers no JSON-RPC interface.
var ErrNoJSONRPC = errors.New("a2acall: the agent card offers no JSON-RPC interface")

// Endpoint returns the URL of card's JSON-RPC interface: the card's URL when
// its preferred transport is JSON-RPC (or unnamed, which A2A 0.3 defaults to
// JSON-RPC), else the first additional interface over JSON-RPC.
func Endpoint(card *a2a.AgentCard) (string, error) {
	if card.URL != "" && (card.PreferredTransport == "" || card.PreferredTransport == a2a.TransportProtocolJSONRPC) {
		return card.URL, nil
	}
	for _, in := range card.AdditionalInterfaces {
		if in.Transport == a2a.TransportProtocolJSONRPC && in.URL != "" {
			return in.URL, nil
		}
	}
	return "", ErrNoJSONRPC
}
