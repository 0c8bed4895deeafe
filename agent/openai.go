package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd/agentd/api"
)

// openAIModel is an intelligence behind the OpenAI-compatible Chat Completions
// API with tool calling: OpenAI itself, vLLM, Ollama, llama.cpp's server, or a
// gateway such as LiteLLM. It is used by one loop at a time.
//
// It speaks through the official SDK (github.com/openai/openai-go): the SDK
// builds the request, sends it with the key, times each attempt out
// (option.WithRequestTimeout) and decodes the completion and the API's errors
// (*openai.Error). The SDK's own retries are off (option.WithMaxRetries(0)):
// its loop does not retry an attempt that timed out, its backoff is fixed at
// half a second (agentd's is --intelligence-backoff), and it would sleep up to
// the subagent's deadline for a Retry-After that cannot be honoured. So this
// client retries 408, 409, 429 and 5xx answers, attempts that time out, and
// connection errors itself, honouring Retry-After against the subagent's
// deadline, and tells an unreachable endpoint (ErrUnreachable, exit 4) from
// other failures. What other servers send that the SDK does not read (an
// error body that is not OpenAI's shape, content as an array of parts) is
// handled in compat.go.
type openAIModel struct {
	chat    openai.ChatCompletionService
	model   string
	timeout time.Duration // one attempt
	retries int
	backoff time.Duration // before the first retry when the server names no wait
}

// newOpenAIModel validates spec and returns its client. key may be empty (a
// local server without auth): then no Authorization header is sent.
func newOpenAIModel(spec api.Intelligence, key string) (*openAIModel, error) {
	u, err := url.Parse(spec.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("agent: intelligence %q: want builtin:demo, builtin:wait, or an http(s) base URL such as http://127.0.0.1:8000/v1", spec.Endpoint)
	}
	if u.User != nil {
		return nil, fmt.Errorf("agent: intelligence %q: credentials in the URL are refused; use AGENT_INTELLIGENCE_KEY or --intelligence-key-file", u.Redacted())
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
	opts := []option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}),
		option.WithBaseURL(strings.TrimSuffix(spec.Endpoint, "/") + "/"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(spec.Timeout()),
		option.WithMiddleware(compatMiddleware),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	return &openAIModel{
		// The chat service alone, not openai.NewClient: that one reads
		// OPENAI_* variables from the environment and builds every service.
		chat:    openai.NewChatCompletionService(opts...),
		model:   spec.Model,
		timeout: spec.Timeout(),
		retries: spec.RetryCount(),
		backoff: spec.Backoff(),
	}, nil
}

// Complete sends one Chat Completions request, retrying as the type comment
// says. An error after ctx ended is ctx's cause.
func (m *openAIModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	params := m.params(req)
	for attempt := 0; ; attempt++ {
		cc, err := m.chat.New(ctx, params)
		if err == nil {
			return convertCompletion(cc, req)
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// ctx is live, so the SDK's per-attempt timeout ended it.
			err = fmt.Errorf("no answer within the request timeout of %s: %w", m.timeout, err)
		}
		wait, retryable := m.retryWait(err, attempt)
		if !retryable || attempt >= m.retries {
			return nil, finalError(err, attempt)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, fmt.Errorf("%w (the next retry, in %s, would pass the deadline)", finalError(err, attempt), wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
	}
}

// retryWait says whether err is worth another attempt and how long to wait:
// the server's Retry-After (or Retry-After-Ms) when it names one, else an
// exponential backoff from m.backoff, capped at api.MaxRetryBackoff.
func (m *openAIModel) retryWait(err error, attempt int) (time.Duration, bool) {
	backoff := time.Duration(float64(m.backoff) * math.Pow(2, float64(attempt)))
	if backoff <= 0 || backoff > api.MaxRetryBackoff {
		backoff = api.MaxRetryBackoff
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		switch s := apiErr.StatusCode; {
		case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
		default:
			return 0, false
		}
		if apiErr.Response != nil {
			if d, ok := parseRetryAfter(apiErr.Response.Header, time.Now()); ok {
				return d, true
			}
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
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		s := fmt.Sprintf("intelligence answered %d %s%s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode), tries)
		if msg := clip(apiErr.Message); msg != "" {
			s += ": " + msg
		}
		return errors.New(s)
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
// value is ignored. (The SDK parses these headers only inside its own retry
// loop, which is off, and gives up on a wait over two minutes.)
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

// params turns a Request into the Chat Completions request body.
func (m *openAIModel) params(req *Request) openai.ChatCompletionNewParams {
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case RoleUser:
			msgs = append(msgs, openai.UserMessage(msg.Content))
		case RoleTool:
			msgs = append(msgs, openai.ToolMessage(msg.Content, msg.ToolCallID))
		case RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			// An assistant turn that only calls tools has no content; every
			// other turn has one, empty or not.
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Args)},
					},
				})
			}
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.model), Messages: msgs}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: toolParameters(t.Parameters)}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return p
}

// toolParameters is a tool's argument schema as the API wants it: a JSON
// object; a missing or non-object schema becomes the empty object schema.
// Each member's value is passed as written (json.RawMessage): the SDK's encoder
// would turn a json.Number into a string and a float64 would round large
// integers.
func toolParameters(schema json.RawMessage) shared.FunctionParameters {
	var m map[string]json.RawMessage
	if len(schema) == 0 || json.Unmarshal(schema, &m) != nil || m == nil {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	}
	p := make(shared.FunctionParameters, len(m))
	for k, v := range m {
		p[k] = v
	}
	return p
}

// convertCompletion turns the first choice of a completion into a Response.
func convertCompletion(cc *openai.ChatCompletion, req *Request) (*Response, error) {
	if len(cc.Choices) == 0 {
		return nil, errors.New("intelligence answered with no choices")
	}
	ch := cc.Choices[0]
	out := &Response{Content: messageText(ch.Message), Refusal: ch.Message.Refusal}
	for i, tc := range ch.Message.ToolCalls {
		call := ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(tc.Function.Arguments)}
		if tc.Type == "custom" {
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
	if u := cc.Usage; u.PromptTokens >= 0 && u.CompletionTokens >= 0 && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
		out.Usage = api.Usage{TokensIn: u.PromptTokens, TokensOut: u.CompletionTokens}
	} else {
		// A server that reports no usage (or nonsense) is still held to the
		// token budget: count it the way the builtin models do.
		text := out.Content + out.Refusal
		for _, tc := range out.ToolCalls {
			text += tc.Name + string(tc.Args)
		}
		out.Usage = api.Usage{TokensIn: estimateTokens(requestText(req)), TokensOut: estimateTokens(text)}
	}
	return out, nil
}
