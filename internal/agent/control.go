package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
)

// ErrCancelled is the cancellation cause when the supervisor sends ctrl/cancel.
var ErrCancelled = errors.New("agent: cancelled by the supervisor")

// ErrControlClosed is the cancellation cause when the control channel closes
// under a running loop: the supervisor is gone or has given up on this child.
var ErrControlClosed = errors.New("agent: control channel closed")

// control is the child's end of the control channel. Its reader goroutine
// answers pings and cancels directly, never waiting on the loop, so a child in a
// long model or tool call still answers ctrl/ping.
type control struct {
	w   *api.FrameWriter
	r   *api.FrameReader
	log *slog.Logger

	mu      sync.Mutex // guards nextID, pending, closed
	nextID  uint64
	pending map[uint64]chan *api.Frame
	closed  bool

	hold gate // closed between ctrl/pause and ctrl/resume
	// steers are the steering messages not yet taken by the loop.
	steers steers

	// clock is the run's deadline, paused while a question waits; nil
	// before the run starts.
	clock *pausableDeadline

	// maxFrame is the frame limit, payloadBytes the spawn payload's size
	// without its Resume: a subagent.ask call carries the conversation only
	// when a spawn frame could carry it back (CallToolWith).
	maxFrame     int
	payloadBytes int
}

// newControl returns the control channel over r and w, with the frame limit
// the supervisor set in api.EnvMaxFrame (api.DefaultMaxFrame without one).
func newControl(r io.Reader, w io.Writer, log *slog.Logger) *control {
	max := api.MaxFrameFromEnv()
	if max <= 0 {
		max = api.DefaultMaxFrame
	}
	return &control{
		maxFrame: max,
		w:        api.NewFrameWriter(w, max),
		r:        api.NewFrameReader(r, max),
		log:      log,
		pending:  make(map[uint64]chan *api.Frame),
	}
}

// decodeSpawn decodes the first downward frame (f, or the error reading it),
// which must be the spawn payload.
func (c *control) decodeSpawn(f *api.Frame, err error) (*api.SpawnPayload, error) {
	if err != nil {
		return nil, fmt.Errorf("read spawn frame: %w", err)
	}
	if f.Method != api.MethodSpawn {
		return nil, fmt.Errorf("first frame is %q, want %q", f.Method, api.MethodSpawn)
	}
	fitProcs(len(f.Params))
	if len(f.Params) == 0 {
		return nil, fmt.Errorf("%s: missing params", f.Method)
	}
	c.payloadBytes = len(f.Params)
	var p api.SpawnPayload
	// The frame is this child's alone (the reader allocated its body for
	// it): its objective is decoded into it (inplace.go).
	if err := decodeSpawnParams(f.Params, &p); err != nil {
		return nil, err
	}
	fitMemoryLimit(c.payloadBytes)
	if p.Resume != nil {
		q := p
		q.Resume = nil
		if b, err := json.Marshal(q); err == nil {
			c.payloadBytes = len(b)
		}
	}
	return &p, nil
}

// serve reads downward frames until the channel closes, then cancels the loop
// with ErrControlClosed. cancel is the loop's cancel function.
func (c *control) serve(cancel context.CancelCauseFunc) {
	defer func() {
		c.mu.Lock()
		c.closed = true
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
		cancel(ErrControlClosed)
	}()
	for {
		f, err := c.r.Read()
		if err != nil {
			if err != io.EOF {
				c.log.Error("control channel read failed", "err", err)
			}
			return
		}
		switch {
		case f.IsResponse():
			c.mu.Lock()
			ch := c.pending[f.ID]
			delete(c.pending, f.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- f
			}
		case f.Method == api.MethodPing:
			var p api.Ping
			if err := api.DecodeParams(f, &p); err != nil {
				c.log.Warn("bad ping", "err", err)
				continue
			}
			if err := c.w.Send(api.MethodPong, 0, p); err != nil {
				c.log.Warn("pong failed", "err", err)
			}
		case f.Method == api.MethodPause:
			c.log.Info("paused by the supervisor: holding before the next model call")
			c.hold.pause()
		case f.Method == api.MethodResume:
			c.log.Info("resumed by the supervisor")
			c.hold.resume()
		case f.Method == api.MethodSteer:
			var p api.Steer
			if err := api.DecodeParams(f, &p); err != nil {
				c.log.Warn("bad steer", "err", err)
				continue
			}
			if !c.steers.add(p.Text) {
				c.log.Warn("steering message dropped: too many waiting", "max", api.MaxSteerQueued)
				continue
			}
			c.log.Info("steering message received: it joins the conversation before the next model call", "bytes", len(p.Text))
		case f.Method == api.MethodCancel:
			var p api.Cancel
			_ = api.DecodeParams(f, &p)
			c.log.Info("cancel requested", "reason", p.Reason)
			cancel(ErrCancelled)
		default:
			c.log.Warn("unexpected control frame", "method", f.Method)
		}
	}
}

// resumeRoom is what a spawn frame holds beside the payload and the
// conversation: the answer (api.MaxAnswer) and the envelope's fields.
const resumeRoom = api.MaxAnswer + 4<<10

// call sends a tool/call request and waits for its answer. A subagent.ask
// call carries conv when a spawn frame could carry it back: the payload,
// the conversation and an answer within the frame limit. text is the
// result as the model is shown it (toolText's) when call made it without a
// copy (decodeToolResult), else "".
func (c *control) call(ctx context.Context, tool string, args json.RawMessage, conv *api.Conversation) (r api.ToolResult, text string, err error) {
	if tool == api.ToolAsk && c.clock != nil {
		c.clock.pause()
		defer c.clock.resume()
	}
	call := api.ToolCall{Tool: tool, Args: args, Traceparent: telemetry.Traceparent(ctx)}
	if conv != nil && tool == api.ToolAsk {
		if b, err := json.Marshal(conv); err == nil && len(b)+c.payloadBytes+resumeRoom <= c.maxFrame {
			call.Conversation = conv
		} else {
			c.log.Warn("the conversation is too large to store with the question: this subagent keeps its process while it waits", "bytes", len(b), "frame_limit", c.maxFrame)
		}
	}
	f, err := c.exchange(ctx, api.MethodToolCall, func(id uint64) error { return c.sendToolCall(id, &call) })
	if err != nil {
		return api.ToolResult{}, "", err
	}
	if text, err = decodeToolResult(f.Result, &r); err != nil {
		return api.ToolResult{}, "", fmt.Errorf("%s result: %w", api.MethodToolCall, err)
	}
	return r, text, nil
}

// sendToolCall writes the tool/call request id for call. Its arguments
// are written as they are, not copied into the frame's buffer (and, first,
// into encoding/json's), when that is how api.FrameWriter.Send would
// encode them: compact JSON with nothing it escapes. A 16 KiB call
// allocated 43 KB through Send's buffers, grown by doubling and kept in
// their pools, which a waiting child does not empty.
func (c *control) sendToolCall(id uint64, call *api.ToolCall) error {
	if call.Conversation != nil || len(call.Args) == 0 || !plainJSONString(call.Tool) || !plainJSONString(call.Traceparent) || !compactJSON(call.Args) {
		return c.w.Send(api.MethodToolCall, id, call)
	}
	frame := make([]byte, 0, 96+len(call.Tool)+len(call.Traceparent))
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = strconv.AppendUint(frame, id, 10)
	frame = append(frame, `,"method":"`+api.MethodToolCall+`","params":{"tool":"`...)
	frame = append(frame, call.Tool...)
	frame = append(frame, `","args":`...)
	head := len(frame)
	if call.Traceparent != "" {
		frame = append(frame, `,"traceparent":"`...)
		frame = append(frame, call.Traceparent...)
		frame = append(frame, '"')
	}
	frame = append(frame, "}}"...)
	return c.w.WriteParts(frame[:head], call.Args, frame[head:])
}

// plainJSONString reports whether s encodes in JSON as itself between
// quotes: printable ASCII with nothing encoding/json escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// compactJSON reports whether b is valid JSON that encoding/json writes
// as it is (a json.RawMessage is compacted and HTML-escaped): no space
// outside its strings, no '<', '>', '&', U+2028 or U+2029 in them.
func compactJSON(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			return false
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// request sends an upward request frame and waits for its answer, decoding the
// result into out. An error answer is returned as an *api.RPCError.
func (c *control) request(ctx context.Context, method string, params, out any) error {
	f, err := c.exchange(ctx, method, func(id uint64) error { return c.w.Send(method, id, params) })
	if err != nil {
		return err
	}
	if err := json.Unmarshal(f.Result, out); err != nil {
		return fmt.Errorf("%s result: %w", method, err)
	}
	return nil
}

// exchange sends an upward request (send writes it with the id it is
// given) and returns its answer. An error answer is returned as an
// *api.RPCError.
func (c *control) exchange(ctx context.Context, method string, send func(id uint64) error) (*api.Frame, error) {
	ch := make(chan *api.Frame, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrControlClosed
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	if err := send(id); err != nil {
		c.forget(id)
		return nil, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, ErrControlClosed
		}
		if f.Error != nil {
			return nil, f.Error
		}
		return f, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, context.Cause(ctx)
	}
}

// PutBlob implements BlobStore over the control channel: the supervisor keeps
// the content and answers with its agent://blob/ uri.
func (c *control) PutBlob(ctx context.Context, mediaType, content string) (string, error) {
	var ref api.BlobRef
	if err := c.request(ctx, api.MethodBlobPut, api.BlobPut{MediaType: mediaType, Content: content}, &ref); err != nil {
		return "", fmt.Errorf("blob/put: %w", err)
	}
	if _, ok := api.ParseBlobURI(ref.URI); !ok {
		return "", fmt.Errorf("blob/put: the supervisor answered with uri %q", ref.URI)
	}
	return ref.URI, nil
}

func (c *control) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// event reports progress and usage upward.
func (c *control) event(step int, kind string, delta api.Usage) {
	if err := c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: step, Kind: kind, UsageDelta: delta}); err != nil {
		c.log.Warn("loop/event failed", "err", err)
	}
}

// text sends a piece of the model's text of step upward (api.EventText).
func (c *control) text(step int, text string) {
	if err := c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: step, Kind: api.EventText, Text: text}); err != nil {
		c.log.Warn("loop/event text failed", "err", err)
	}
}
