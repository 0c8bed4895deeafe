package a2arest

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
	"net/url"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2av1"
)

// maxAnswer bounds one answer: a response body, or one event of a stream
// (a2acall.MaxAnswer, lowered by the tests). A bigger one is an error
// wrapping a2acall.ErrTooLarge.
var maxAnswer = a2acall.MaxAnswer

// maxErrorBody bounds the error body a client reads.
const maxErrorBody = 64 << 10

// Client calls one agent over A2A 1.0's HTTP+JSON binding. It is an
// a2acall.Transport: it takes and answers a2a-go's types and reports the
// agent's errors as *Error, which wraps a2a-go's sentinels. It is safe for
// concurrent use; create it with New.
type Client struct {
	base string
	hc   *http.Client
	opts a2acall.Options
}

var _ a2acall.Transport = (*Client)(nil)

// New returns a client of the HTTP+JSON interface at url (the interface's
// URL in the agent card: the routes are appended to it) over hc
// (http.DefaultClient if nil). opts.NonBlocking makes SendMessage ask for an
// answer at once (returnImmediately) unless the params say whether to
// block; opts.Header adds headers to each request.
func New(url string, hc *http.Client, opts a2acall.Options) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(url, "/"), hc: hc, opts: opts}
}

// SendMessage calls SendMessage (POST /message:send) and returns the task or
// the message the agent answered.
func (c *Client) SendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	raw, err := c.unary(ctx, a2av1.MethodSendMessage, nil, nil, c.sendRequest(p))
	if err != nil {
		return nil, err
	}
	res, err := a2av1.DecodeSendResult(raw)
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: the answer: %w", a2av1.MethodSendMessage, err)
	}
	return res, nil
}

// sendRequest is p as SendMessage's request, non-blocking as Options say.
func (c *Client) sendRequest(p *a2a.MessageSendParams) *a2av1.SendMessageRequest {
	req := a2av1.SendParamsFrom(p)
	if c.opts.NonBlocking && (p.Config == nil || p.Config.Blocking == nil) {
		if req.Configuration == nil {
			req.Configuration = &a2av1.SendMessageConfiguration{}
		}
		req.Configuration.ReturnImmediately = true
	}
	return req
}

// SendStreamingMessage calls SendStreamingMessage (POST /message:stream) and
// yields the stream's events until it ends, an error (the last yield), or
// the caller stops.
func (c *Client) SendStreamingMessage(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return c.stream(ctx, a2av1.MethodSendStreamingMessage, map[string]string{}, a2av1.SendParamsFrom(p))
}

// GetTask calls GetTask (GET /tasks/{id}).
func (c *Client) GetTask(ctx context.Context, p *a2a.TaskQueryParams) (*a2a.Task, error) {
	q := url.Values{}
	if p.HistoryLength != nil {
		q.Set("historyLength", strconv.Itoa(*p.HistoryLength))
	}
	return c.task(ctx, a2av1.MethodGetTask, map[string]string{"id": string(p.ID)}, q, nil)
}

// CancelTask calls CancelTask (POST /tasks/{id}:cancel) and returns the task
// as the agent answered.
func (c *Client) CancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	var body any
	if len(p.Metadata) > 0 {
		body = map[string]any{"metadata": p.Metadata}
	}
	return c.task(ctx, a2av1.MethodCancelTask, map[string]string{"id": string(p.ID)}, nil, body)
}

// ResubscribeToTask calls SubscribeToTask (GET /tasks/{id}:subscribe) and
// yields the task's events as SendStreamingMessage does. A task that has
// ended is refused by the agent (UnsupportedOperation).
func (c *Client) ResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return c.stream(ctx, a2av1.MethodSubscribeToTask, map[string]string{"id": string(p.ID)}, nil)
}

// SetTaskPushConfig calls CreateTaskPushNotificationConfig (POST
// /tasks/{taskId}/pushNotificationConfigs).
func (c *Client) SetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	body := a2av1.PushConfigFrom(p.TaskID, p.Config)
	raw, err := c.unary(ctx, a2av1.MethodCreatePushConfig, map[string]string{"taskId": string(p.TaskID)}, nil, &body)
	if err != nil {
		return nil, err
	}
	return pushConfigTo(a2av1.MethodCreatePushConfig, raw, p.TaskID)
}

// GetTaskPushConfig calls GetTaskPushNotificationConfig (GET
// /tasks/{taskId}/pushNotificationConfigs/{id}).
func (c *Client) GetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	raw, err := c.unary(ctx, a2av1.MethodGetPushConfig, map[string]string{"taskId": string(p.TaskID), "id": p.ConfigID}, nil, nil)
	if err != nil {
		return nil, err
	}
	return pushConfigTo(a2av1.MethodGetPushConfig, raw, p.TaskID)
}

// ListTaskPushConfig calls ListTaskPushNotificationConfigs (GET
// /tasks/{taskId}/pushNotificationConfigs).
func (c *Client) ListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	raw, err := c.unary(ctx, a2av1.MethodListPushConfigs, map[string]string{"taskId": string(p.TaskID)}, nil, nil)
	if err != nil {
		return nil, err
	}
	list, err := a2av1.DecodePushConfigList(raw)
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: the answer: %w", a2av1.MethodListPushConfigs, err)
	}
	for _, cfg := range list {
		if cfg.TaskID == "" {
			cfg.TaskID = p.TaskID
		}
	}
	return list, nil
}

// DeleteTaskPushConfig calls DeleteTaskPushNotificationConfig (DELETE
// /tasks/{taskId}/pushNotificationConfigs/{id}).
func (c *Client) DeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	_, err := c.unary(ctx, a2av1.MethodDeletePushConfig, map[string]string{"taskId": string(p.TaskID), "id": p.ConfigID}, nil, nil)
	return err
}

// pushConfigTo reads a push config answer; one that names no task is the
// request's task's.
func pushConfigTo(op string, raw []byte, taskID a2a.TaskID) (*a2a.TaskPushConfig, error) {
	cfg, err := a2av1.DecodePushConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: the answer: %w", op, err)
	}
	if cfg.TaskID == "" {
		cfg.TaskID = taskID
	}
	return cfg, nil
}

func (c *Client) task(ctx context.Context, op string, path map[string]string, q url.Values, body any) (*a2a.Task, error) {
	raw, err := c.unary(ctx, op, path, q, body)
	if err != nil {
		return nil, err
	}
	t, err := a2av1.DecodeTask(raw)
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: the answer: %w", op, err)
	}
	return t, nil
}

// do sends op's request: its route with the path parameters and the query,
// body (if not nil) as JSON. It returns the response once its status is
// 2xx, else the error the agent answered (*Error).
func (c *Client) do(ctx context.Context, op string, path map[string]string, q url.Values, body any, accept string) (*http.Response, error) {
	rt := RouteOf(op)
	p, err := rt.Path(path)
	if err != nil {
		return nil, err
	}
	u := c.base + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("a2arest: %s: encode the request: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, rt.Method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("A2A-Version", a2av1.Version)
	if c.opts.Header != nil {
		c.opts.Header(ctx, req.Header)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return nil, ReadError(op, resp.StatusCode, b)
	}
	return resp, nil
}

// unary sends op's request and returns its answer's body, at most
// maxAnswer bytes.
func (c *Client) unary(ctx context.Context, op string, path map[string]string, q url.Values, body any) ([]byte, error) {
	resp, err := c.do(ctx, op, path, q, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxAnswer)+1))
	if err != nil {
		return nil, fmt.Errorf("a2arest: %s: read the answer: %w", op, err)
	}
	if len(b) > maxAnswer {
		return nil, fmt.Errorf("a2arest: %s: %w (%d bytes)", op, a2acall.ErrTooLarge, maxAnswer)
	}
	return b, nil
}

// stream sends op's request and yields the events of its text/event-stream
// answer, each event's data a StreamResponse; an event named "error" holds
// the error body, which ends the stream with that error (*Error).
func (c *Client) stream(ctx context.Context, op string, path map[string]string, body any) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		resp, err := c.do(ctx, op, path, nil, body, "text/event-stream")
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			yield(nil, fmt.Errorf("a2arest: %s: the answer is %q, not an event stream: %w", op, ct, a2a.ErrInvalidAgentResponse))
			return
		}
		for ev, err := range sseEvents(resp.Body) {
			if err != nil {
				yield(nil, fmt.Errorf("a2arest: %s: the stream: %w", op, err))
				return
			}
			if ev.name == "error" {
				yield(nil, ReadError(op, resp.StatusCode, ev.data))
				return
			}
			out, err := a2av1.DecodeEvent(ev.data)
			if err != nil {
				yield(nil, fmt.Errorf("a2arest: %s: an event: %w", op, err))
				return
			}
			if !yield(out, nil) {
				return
			}
		}
	}
}

// sseEvent is one server-sent event: its name ("" for the default) and its
// data lines joined by newlines.
type sseEvent struct {
	name string
	data []byte
}

// sseEvents yields the events of r that carry data, skipping comments and
// other fields. An event over maxAnswer is an error wrapping
// a2acall.ErrTooLarge.
func sseEvents(r io.Reader) iter.Seq2[sseEvent, error] {
	return func(yield func(sseEvent, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var ev sseEvent
		has := false
		for {
			line, err := readLine(br)
			if err != nil {
				if errors.Is(err, io.EOF) {
					if has {
						yield(ev, nil)
					}
					return
				}
				yield(sseEvent{}, err)
				return
			}
			if len(line) == 0 {
				if has && !yield(ev, nil) {
					return
				}
				ev, has = sseEvent{}, false
				continue
			}
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.name = string(value)
			case "data":
				if has {
					ev.data = append(ev.data, '\n')
				}
				if len(ev.data)+len(value) > maxAnswer {
					yield(sseEvent{}, fmt.Errorf("%w (%d bytes)", a2acall.ErrTooLarge, maxAnswer))
					return
				}
				ev.data = append(ev.data, value...)
				has = true
			}
		}
	}
}

// readLine reads one line without its end (\n or \r\n), at most maxAnswer
// bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxAnswer+2 {
			return nil, fmt.Errorf("%w (%d bytes)", a2acall.ErrTooLarge, maxAnswer)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return bytes.TrimSuffix(line, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}
