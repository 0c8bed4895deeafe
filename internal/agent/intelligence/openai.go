package intelligence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// openAIModel is an intelligence behind the OpenAI-compatible Chat Completions
// API with tool calling: OpenAI itself, vLLM, Ollama, llama.cpp's server, or a
// gateway such as LiteLLM. It is used by one loop at a time.
//
// It speaks the one call it makes directly, with net/http and encoding/json
// (the wire types are chatwire.go's), rather than through the openai-go SDK,
// whose root package (the only one with Chat Completions) links the whole API:
// 18 MB of the binary and about 2 ms of package init in every process, every
// subagent included (docs/dependencies.md has the figures).
//
// Each attempt is bounded by the request timeout, the answer's body included.
// It retries 408, 409, 429 and 5xx answers, attempts that time out, and
// connection errors, honouring Retry-After against the subagent's deadline,
// and tells an unreachable endpoint (ErrUnreachable, exit 4) from other
// failures. What other servers send besides OpenAI's shapes (an error body in
// another shape, content as an array of parts, a JSON answer under another
// media type) is read as well (compat.go, chatwire.go). The OPENAI_*
// environment variables are not read.
type openAIModel struct {
	client  *http.Client
	url     string // {base}/chat/completions
	key     string
	model   string
	timeout time.Duration // one attempt
	retries int
	backoff time.Duration // before the first retry when the server names no wait
	// endpoint is the base URL, for the log (it holds no credential: one in
	// the URL is refused).
	endpoint string
	log      *slog.Logger // set by SetLogger; discards until then
	// jitter returns a number in [0, 1): up to a quarter of a backoff is
	// added at random, so that children retrying together spread out.
	jitter func() float64
	tools  toolsCache // the tools offered, encoded
}

// SetLogger gives the model the subagent's logger: each retry is logged at
// info and a request that fails for good at warn, with the endpoint and the
// error (never the key).
func (m *openAIModel) SetLogger(l *slog.Logger, _ bool) { m.log = l }

// checkEndpoint validates an HTTP dialect's spec: an http(s) base URL (want
// says what else it could have been) without credentials (keys says where
// a key goes instead), query or fragment, a model name, and the spec's
// numbers. It returns the parsed URL.
func checkEndpoint(spec api.Intelligence, want, keys string) (*url.URL, error) {
	u, err := url.Parse(spec.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent: intelligence %q: want %s", spec.Endpoint, want)
	}
	if u.User != nil {
		return nil, fmt.Errorf("agent: intelligence %q: credentials in the URL are refused; use %s", u.Redacted(), keys)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("agent: intelligence %q: a base URL has no query or fragment", spec.Endpoint)
	}
	if spec.Model == "" {
		return nil, fmt.Errorf("agent: intelligence %s: a model name is required (--model, AGENT_MODEL)", spec.Endpoint)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return u, nil
}

// newOpenAIModel validates spec and returns its client. key may be empty (a
// local server without auth): then no Authorization header is sent.
func newOpenAIModel(spec api.Intelligence, key string) (*openAIModel, error) {
	_, err := checkEndpoint(spec, "builtin:demo, builtin:wait, or an http(s) base URL such as http://127.0.0.1:8000/v1", "AGENT_INTELLIGENCE_KEY or --intelligence-key-file")
	if err != nil {
		return nil, err
	}
	return &openAIModel{
		client:  &http.Client{Transport: newTransport()},
		url:     strings.TrimSuffix(spec.Endpoint, "/") + "/chat/completions",
		key:     key,
		model:   spec.Model,
		timeout: spec.Timeout(),
		retries: spec.RetryCount(),
		backoff: spec.Backoff(),

		endpoint: spec.Endpoint,
		log:      slog.New(slog.DiscardHandler),
		jitter:   rand.Float64,
	}, nil
}

// Complete sends one Chat Completions request, retrying as the type comment
// says. An error after ctx ended is ctx's cause. With req.OnText set the
// answer is streamed (stream.go) and each piece of its text handed to OnText
// as it arrives; an attempt that failed after some text was handed on is not
// retried (the text would be handed on twice).
func (m *openAIModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	bs, err := m.body(req)
	if err != nil {
		return nil, err
	}
	var emitted bool
	onText := req.OnText
	if onText != nil {
		onText = func(s string) { emitted = true; req.OnText(s) }
	}
	a := attempts{log: m.log, endpoint: m.endpoint, model: m.model, timeout: m.timeout, retries: m.retries, retryWait: m.retryWait, final: finalError}
	got, err := run(ctx, a, func() bool { return emitted }, func(actx context.Context) (*chatResponse, error) {
		return m.post(actx, bs, onText)
	})
	if err != nil {
		return nil, err
	}
	return convertCompletion(got, req)
}

// body is req's request body, its tools from the model's toolsCache; it
// streams when req.OnText is set.
func (m *openAIModel) body(req *Request) (*jsonBody, error) {
	cr := m.chatRequest(req)
	tools, err := m.tools.encoded(req.Tools, func(specs []ToolSpec) ([]byte, error) { return chatToolsJSON(chatTools(specs)) })
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	cr.toolsJSON = tools
	if req.OnText != nil {
		cr.Stream, cr.StreamOptions = true, &chatStreamOptions{IncludeUsage: true}
	}
	bs, err := chatBody(&cr)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	return bs, nil
}

// post makes one attempt under ctx, which bounds the whole exchange, the
// answer's body included. A non-2xx answer is an *httpStatusError carrying
// the provider's message, whatever the error body's shape; a 2xx answer is
// decoded as JSON whatever its Content-Type says, and one over
// maxResponseBytes is an error. With onText set the request asked for a
// stream: an event stream is read as one (readStream), and a server that
// answers with a whole JSON completion instead has its text handed to onText
// at once.
func (m *openAIModel) post(ctx context.Context, bs bodySource, onText func(string)) (*chatResponse, error) {
	hr, err := newPost(ctx, m.url, bs)
	if err != nil {
		return nil, fmt.Errorf("encode chat request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if onText != nil {
		hr.Header.Set("Accept", "text/event-stream, application/json") // a whole answer is read too
	}
	hr.Header.Set("User-Agent", "agentd")
	if m.key != "" {
		hr.Header.Set("Authorization", "Bearer "+m.key)
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
		return nil, &httpStatusError{status: resp.StatusCode, header: resp.Header, message: errorMessage(b)}
	}
	if onText != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cr, err := readStream(&limitedBody{rc: resp.Body, left: maxResponseBytes}, onText)
		if err != nil {
			return nil, fmt.Errorf("read streamed answer: %w", err)
		}
		return cr, nil
	}
	b, err := readAnswer(resp)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	var cr chatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		return nil, &answerError{fmt.Errorf("decode answer: %w", err)}
	}
	if onText != nil && len(cr.Choices) > 0 && cr.Choices[0].Message.Content.text() != "" {
		onText(cr.Choices[0].Message.Content.text())
	}
	return &cr, nil
}

// httpStatusError is a non-2xx answer from the endpoint.
type httpStatusError struct {
	status  int
	header  http.Header
	message string // the provider's error message, if it sent one
}

func (e *httpStatusError) Error() string {
	s := fmt.Sprintf("intelligence answered %d %s", e.status, http.StatusText(e.status))
	if e.message != "" {
		s += ": " + e.message
	}
	return s
}

// retryWait says whether err is worth another attempt and how long to wait:
// the server's Retry-After (or Retry-After-Ms) when it names one, else an
// exponential backoff from m.backoff with up to a quarter of it added at
// random, capped at api.MaxRetryBackoff.
func (m *openAIModel) retryWait(err error, attempt int) (time.Duration, bool) {
	backoff := time.Duration(float64(m.backoff) * math.Pow(2, float64(attempt)))
	if backoff <= 0 || backoff > api.MaxRetryBackoff {
		backoff = api.MaxRetryBackoff
	}
	if m.jitter != nil {
		backoff += time.Duration(m.jitter() * float64(backoff) / 4)
		backoff = min(backoff, api.MaxRetryBackoff)
	}
	var se *httpStatusError
	if errors.As(err, &se) {
		switch s := se.status; {
		case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
		default:
			return 0, false
		}
		if d, ok := parseRetryAfter(se.header, time.Now()); ok {
			return d, true
		}
		return backoff, true
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || isUnreachable(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) {
		return backoff, true
	}
	return 0, false
}

// finalError describes the error that ends the call: an unreachable endpoint
// wraps ErrUnreachable; an HTTP error names the status and the provider's
// message.
func finalError(err error, attempt int) error {
	tries := ""
	if attempt > 0 {
		tries = fmt.Sprintf(" (after %d attempts)", attempt+1)
	}
	if isUnreachable(err) {
		return fmt.Errorf("%w%s: %v", ErrUnreachable, tries, err)
	}
	var se *httpStatusError
	if errors.As(err, &se) {
		s := fmt.Sprintf("intelligence answered %d %s%s", se.status, http.StatusText(se.status), tries)
		if se.message != "" {
			s += ": " + se.message
		}
		return &finalStatusError{text: s, status: se}
	}
	return fmt.Errorf("intelligence call failed%s: %w", tries, err)
}

// isUnreachable reports whether err means the endpoint could not be reached at
// all: a DNS failure or a failed dial (connection refused, no route).
func isUnreachable(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// parseRetryAfter reads how long the server asks a client to wait:
// Retry-After-Ms (milliseconds, OpenAI's extension), else Retry-After as
// delta-seconds or an HTTP date. A negative, unparsable or absurd (over a day)
// value is ignored.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	const maxWait = 24 * time.Hour
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= float64(maxWait/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s >= 0 && s <= maxWait.Seconds() {
			return time.Duration(s * float64(time.Second)), true
		}
		return 0, false
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		if d <= maxWait {
			return d, true
		}
	}
	return 0, false
}

// chatRequest turns a Request into the Chat Completions request body, but
// for its tools (chatTools, kept encoded in the model's toolsCache).
func (m *openAIModel) chatRequest(req *Request) chatRequest {
	cr := chatRequest{Model: m.model, Messages: make([]chatMessage, 0, len(req.Messages)+1)}
	if req.System != "" {
		cr.Messages = append(cr.Messages, chatMessage{Role: "system", Content: &req.System})
	}
	for _, msg := range req.Messages {
		cm := chatMessage{Role: string(msg.Role)}
		switch msg.Role {
		case RoleUser:
		case RoleTool:
			cm.ToolCallID = msg.ToolCallID
		case RoleAssistant:
			for _, tc := range msg.ToolCalls {
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: tc.ID, Type: "function",
					Function: chatFunctionCall{Name: tc.Name, Arguments: chatArgs(tc.Args)}})
			}
		default:
			continue
		}
		// An assistant turn that only calls tools has no content; every other
		// turn has one, empty or not.
		if msg.Content != "" || len(cm.ToolCalls) == 0 {
			content := msg.Content
			cm.Content = &content
		}
		cr.Messages = append(cr.Messages, cm)
	}
	return cr
}

// chatTools is the tools offered, as Chat Completions wants them.
func chatTools(specs []ToolSpec) []chatTool {
	out := make([]chatTool, 0, len(specs))
	for _, t := range specs {
		out = append(out, chatTool{Type: "function",
			Function: chatFunction{Name: t.Name, Description: t.Description, Parameters: toolParameters(t.Parameters)}})
	}
	return out
}

// toolParameters is a tool's argument schema as the API wants it: a JSON
// object, passed as written (a float64 would round large integers); a missing
// or non-object schema becomes the empty object schema.
func toolParameters(schema json.RawMessage) json.RawMessage {
	if !isObject(schema) {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return schema
}

// isObject says whether b is a JSON object, as json.Unmarshal into a map
// would find it (valid JSON whose value is an object), without decoding it.
func isObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}

// convertCompletion turns the first choice of a completion into a Response.
func convertCompletion(cr *chatResponse, req *Request) (*Response, error) {
	if len(cr.Choices) == 0 {
		return nil, &answerError{errors.New("intelligence answered with no choices")}
	}
	ch := cr.Choices[0]
	out := &Response{Content: ch.Message.Content.text(), Refusal: ch.Message.Refusal}
	for i, tc := range ch.Message.ToolCalls {
		call := ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(tc.Function.Arguments)}
		if call.Args == nil {
			call.Args = json.RawMessage{} // as the string it was read into made it
		}
		if tc.Type == "custom" && tc.Custom != nil {
			input, _ := json.Marshal(map[string]string{"input": tc.Custom.Input})
			call.Name, call.Args = tc.Custom.Name, input
		}
		if call.ID == "" {
			// Some servers leave ids out; the tool turn must still name its call.
			call.ID = "call_" + strconv.Itoa(i)
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	switch ch.FinishReason {
	case "stop":
		out.Finish = FinishStop
	case "tool_calls", "function_call":
		out.Finish = FinishToolCalls
	case "length":
		out.Finish = FinishLength
	case "content_filter":
		out.Finish = FinishContentFilter
	default:
		out.Finish = FinishStop
		if len(out.ToolCalls) > 0 {
			out.Finish = FinishToolCalls
		}
	}
	if out.Refusal != "" {
		out.Finish = FinishRefusal
	}
	if u := cr.Usage; u != nil && u.PromptTokens >= 0 && u.CompletionTokens >= 0 && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
		out.Usage = api.Usage{TokensIn: u.PromptTokens, TokensOut: u.CompletionTokens}
	} else {
		// A server that reports no usage (or nonsense) is still held to the
		// token budget: count it the way the builtin models do.
		text := out.Content + out.Refusal
		for _, tc := range out.ToolCalls {
			text += tc.Name + string(tc.Args)
		}
		out.Usage = api.Usage{TokensIn: requestTokens(req), TokensOut: estimateTokens(text)}
	}
	return out, nil
}
