package intelligence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// anthropicVersion is the Messages API version every request names
// (the anthropic-version header).
const anthropicVersion = "2023-06-01"

// anthropicModel is an intelligence behind Anthropic's Messages API
// (POST {base}/messages), dialect api.DialectAnthropic: tools and tool
// results as content blocks, the system prompt as the top-level system,
// stop reasons, usage with the prompt cache's tokens, and streaming. It is
// used by one loop at a time.
//
// Like the Chat Completions client (openAIModel), it speaks the one call it
// makes directly, with net/http and encoding/json, rather than through the
// official SDK (github.com/anthropics/anthropic-sdk-go), whose root package
// links the whole API into every process: docs/dependencies.md has the
// figures. Its tests hold it to the SDK's own types.
//
// The key goes in the x-api-key header (none when it is empty); the
// ANTHROPIC_* environment variables are not read here (agentd's command
// reads ANTHROPIC_API_KEY as a fallback and hands the key down as every
// key). Every request carries max_tokens (api.Intelligence.OutputTokens).
//
// With Request.OnText set the request streams (server-sent events) and each
// text delta reaches OnText as it arrives; without it, the answer comes
// whole. Each attempt is bounded by the request timeout, the answer's body
// or stream included. It retries 408, 409, 429, 5xx (529, overloaded,
// among them) answers unless the server says x-should-retry: false, an
// overloaded or api error event in a stream, a stream cut before
// message_stop, attempts that time out, and connection errors, honouring
// Retry-After against the subagent's deadline. A stream that fails after
// some of its text reached OnText is not retried: the caller has seen that
// text, and a second answer would not continue it.
type anthropicModel struct {
	client    *http.Client
	url       string // {base}/messages
	key       string
	model     string
	maxTokens int64
	timeout   time.Duration // one attempt
	retries   int
	backoff   time.Duration // before the first retry when the server names no wait
	// endpoint is the base URL, for the log (it holds no credential: one in
	// the URL is refused).
	endpoint string
	log      *slog.Logger // set by SetLogger; discards until then
	tools    toolsCache   // the tools offered, encoded
}

// SetLogger gives the model the subagent's logger: each retry is logged at
// info and a request that fails for good at warn, with the endpoint and the
// error (never the key).
func (m *anthropicModel) SetLogger(l *slog.Logger, _ bool) { m.log = l }

// newAnthropicModel validates spec and returns its client. The base URL is
// the one before /messages (https://api.anthropic.com/v1); a URL with no
// path at all gets /v1, as the SDK's base URL has none.
func newAnthropicModel(spec api.Intelligence, key string) (*anthropicModel, error) {
	u, err := checkEndpoint(spec, "an http(s) base URL of the Messages API such as https://api.anthropic.com/v1", "AGENT_INTELLIGENCE_KEY, ANTHROPIC_API_KEY or --intelligence-key-file")
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(spec.Endpoint, "/")
	if u.Path == "" || u.Path == "/" {
		base += "/v1"
	}
	return &anthropicModel{
		client:    &http.Client{Transport: newTransport()},
		url:       base + "/messages",
		key:       key,
		model:     spec.Model,
		maxTokens: spec.OutputTokens(),
		timeout:   spec.Timeout(),
		retries:   spec.RetryCount(),
		backoff:   spec.Backoff(),

		endpoint: spec.Endpoint,
		log:      slog.New(slog.DiscardHandler),
	}, nil
}

// Complete sends one Messages request, retrying as the type comment says.
// An error after ctx ended is ctx's cause.
func (m *anthropicModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	bs, err := m.body(req)
	if err != nil {
		return nil, err
	}
	// emitted says whether any text reached req.OnText: once it has, a
	// failed stream is not tried again.
	emitted := false
	onText := req.OnText
	if onText != nil {
		onText = func(s string) {
			emitted = true
			req.OnText(s)
		}
	}
	a := attempts{log: m.log, endpoint: m.endpoint, model: m.model, timeout: m.timeout, retries: m.retries, retryWait: m.retryWait, final: anthropicFinalError}
	mr, err := run(ctx, a, func() bool { return emitted }, func(actx context.Context) (*msgResponse, error) {
		return m.post(actx, bs, onText)
	})
	if err != nil {
		return nil, err
	}
	return convertMessage(mr, req), nil
}

// body is req's request body, its tools from the model's toolsCache.
func (m *anthropicModel) body(req *Request) (*jsonBody, error) {
	mreq := m.messagesRequest(req)
	tools, err := m.tools.encoded(req.Tools, func(specs []ToolSpec) ([]byte, error) { return msgToolsJSON(msgTools(specs)) })
	if err != nil {
		return nil, fmt.Errorf("encode messages request: %w", err)
	}
	mreq.toolsJSON = tools
	bs, err := messagesBody(&mreq)
	if err != nil {
		return nil, fmt.Errorf("encode messages request: %w", err)
	}
	return bs, nil
}

// post makes one attempt under ctx, which bounds the whole exchange, the
// answer's body or stream included. A non-2xx answer is an
// *httpStatusError carrying the provider's error type and message. With
// onText set the request asks for a stream; an answer that is a stream
// (text/event-stream) is read event by event, any other 2xx answer is
// decoded as one JSON message (a server that does not stream), whose text
// then reaches onText at once.
func (m *anthropicModel) post(ctx context.Context, bs bodySource, onText func(string)) (*msgResponse, error) {
	stream := onText != nil
	hr, err := newPost(ctx, m.url, bs)
	if err != nil {
		return nil, fmt.Errorf("encode messages request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	hr.Header.Set("User-Agent", "agentd")
	hr.Header.Set("Anthropic-Version", anthropicVersion)
	if m.key != "" {
		hr.Header.Set("X-Api-Key", m.key)
	}
	resp, err := m.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		if err != nil {
			return nil, fmt.Errorf("read error answer %d: %w", resp.StatusCode, err)
		}
		return nil, &httpStatusError{status: resp.StatusCode, header: resp.Header, message: anthropicErrorMessage(b)}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		return readMessageStream(&limitedBody{rc: resp.Body, left: maxResponseBytes}, onText)
	}
	b, err := readAnswer(resp)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	mr, err := decodeMessage(b)
	if err != nil {
		return nil, err
	}
	if onText != nil {
		if text := mr.text(); text != "" {
			onText(text)
		}
	}
	return mr, nil
}

// retryWait says whether err is worth another attempt and how long to wait:
// the server's Retry-After (or Retry-After-Ms) when it names one, else an
// exponential backoff from m.backoff, capped at api.MaxRetryBackoff. An
// answer with x-should-retry says itself whether to retry, as the API's
// own clients read it.
func (m *anthropicModel) retryWait(err error, attempt int) (time.Duration, bool) {
	backoff := time.Duration(float64(m.backoff) * math.Pow(2, float64(attempt)))
	if backoff <= 0 || backoff > api.MaxRetryBackoff {
		backoff = api.MaxRetryBackoff
	}
	var se *httpStatusError
	if errors.As(err, &se) {
		switch strings.ToLower(se.header.Get("X-Should-Retry")) {
		case "false":
			return 0, false
		case "true":
		default:
			switch s := se.status; {
			case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
			default:
				return 0, false
			}
		}
		if d, ok := parseRetryAfter(se.header, time.Now()); ok {
			return d, true
		}
		return backoff, true
	}
	var ee *streamError
	if errors.As(err, &ee) {
		return backoff, ee.retryable()
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || isUnreachable(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return backoff, true
	}
	return 0, false
}

// anthropicFinalError describes the error that ends the call, as finalError
// does, naming 529 (which net/http has no text for) as overloaded.
func anthropicFinalError(err error, attempt int) error {
	var se *httpStatusError
	if !errors.As(err, &se) || se.status != statusOverloaded {
		return finalError(err, attempt)
	}
	tries := ""
	if attempt > 0 {
		tries = fmt.Sprintf(" (after %d attempts)", attempt+1)
	}
	s := fmt.Sprintf("intelligence answered %d Overloaded%s", se.status, tries)
	if se.message != "" {
		s += ": " + se.message
	}
	return errors.New(s)
}

// statusOverloaded is the Messages API's answer when it is overloaded.
const statusOverloaded = 529
