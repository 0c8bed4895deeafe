package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/telemetry"
)

// DefaultSSEKeepAlive is how often an idle event stream gets an SSE comment.
const DefaultSSEKeepAlive = 15 * time.Second

// JSON-RPC 2.0 and A2A error codes.
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternalError    = -32603
	CodeServerError      = -32000
	CodeTaskNotFound     = -32001
	CodeTaskNotCancel    = -32002
	CodePushNotSupported = -32003
	CodeUnsupportedOp    = -32004
	CodeContentType      = -32005
	CodeInvalidResponse  = -32006
	CodeNoExtendedCard   = -32007
)

// A2A 0.3 JSON-RPC method names.
const (
	MethodSend        = "message/send"
	MethodStream      = "message/stream"
	MethodGet         = "tasks/get"
	MethodCancel      = "tasks/cancel"
	MethodResubscribe = "tasks/resubscribe"
	MethodPushSet     = "tasks/pushNotificationConfig/set"
	MethodPushGet     = "tasks/pushNotificationConfig/get"
	MethodPushList    = "tasks/pushNotificationConfig/list"
	MethodPushDelete  = "tasks/pushNotificationConfig/delete"
	MethodExtCard     = "agent/getAuthenticatedExtendedCard"
)

// StoreRetryAfter is the retry hint, in seconds, of the answer to a request
// the task store could not serve (tasks.ErrStoreUnavailable): the message
// names it and the 0.3 error's data carries it as retryAfterSeconds. The
// answer stays HTTP 200: the request was not shed, the store is down.
const StoreRetryAfter = 5

// RPCError is a JSON-RPC error object. Data is an object with a "detail" for
// A2A 0.3 and an array of google.rpc.ErrorInfo for A2A 1.0.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`

	// retryAfter, when positive, makes the answer HTTP 429 with this
	// Retry-After (seconds): the request was shed (shed.go).
	retryAfter int
}

// detail returns the error's human-readable detail, if it has one.
func (e *RPCError) detail() string {
	if m, ok := e.Data.(map[string]any); ok {
		if d, ok := m["detail"].(string); ok {
			return d
		}
	}
	return ""
}

func (e *RPCError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// errorCodes maps a2a-go's sentinel errors to their codes.
var errorCodes = []struct {
	err  error
	code int
}{
	{a2a.ErrParseError, CodeParseError},
	{a2a.ErrInvalidRequest, CodeInvalidRequest},
	{a2a.ErrMethodNotFound, CodeMethodNotFound},
	{a2a.ErrInvalidParams, CodeInvalidParams},
	{a2a.ErrTaskNotFound, CodeTaskNotFound},
	{a2a.ErrTaskNotCancelable, CodeTaskNotCancel},
	{a2a.ErrPushNotificationNotSupported, CodePushNotSupported},
	{a2a.ErrUnsupportedOperation, CodeUnsupportedOp},
	{a2a.ErrUnsupportedContentType, CodeContentType},
	{a2a.ErrInvalidAgentResponse, CodeInvalidResponse},
	{a2a.ErrAuthenticatedExtendedCardNotConfigured, CodeNoExtendedCard},
	{a2a.ErrInternalError, CodeInternalError},
	{a2a.ErrServerError, CodeServerError},
}

// CodeVersionNotSupported answers a request whose A2A-Version header names a
// version this server does not speak.
const CodeVersionNotSupported = a2av1.CodeVersionNotSupported

// VersionHeader is the HTTP header that names the A2A protocol version of a
// request (A2A 1.0 section 3.6); an empty one means 0.3.
const VersionHeader = "A2A-Version"

// versionKey is VersionHeader as http.Header keeps it (A2a-Version): looked
// up by it, a request's header is found without its name canonicalized anew
// (an allocation a request).
var versionKey = http.CanonicalHeaderKey(VersionHeader)

// requestVersion reads the A2A-Version header: "" for none, else "0.3" or
// "1.0" (a patch number is ignored). Any other version is an error.
func requestVersion(h http.Header) (string, error) {
	v := strings.TrimSpace(h.Get(versionKey))
	if v == "" {
		return "", nil
	}
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return "", fmt.Errorf("A2A-Version %q is not a version", v)
	}
	mm := parts[0]
	if len(parts) > 1 {
		mm += "." + parts[1]
	} else {
		mm += ".0"
	}
	switch mm {
	case tasks.Version03, a2av1.Version:
		return mm, nil
	}
	return "", fmt.Errorf("A2A-Version %q is not supported: this agent speaks %s and %s", v, tasks.Version03, a2av1.Version)
}

// toRPCError turns an error into the JSON-RPC error object with the right
// code: an *RPCError in err's chain as it is, a2a-go's sentinel errors by
// their codes, anything else an internal error. It never returns nil.
func toRPCError(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	var shed *admit.ShedError
	if errors.As(err, &shed) {
		return shedError(shed)
	}
	if errors.Is(err, tasks.ErrDraining) {
		return &RPCError{Code: CodeServerError, Message: "agentd is draining: no new work is accepted"}
	}
	if errors.Is(err, tasks.ErrStoreFull) {
		return &RPCError{Code: CodeServerError, Message: "agentd is at its task capacity; retry later"}
	}
	if errors.Is(err, tasks.ErrStoreUnavailable) {
		return &RPCError{
			Code:    CodeServerError,
			Message: fmt.Sprintf("agentd's task store is unavailable: nothing was stored; retry after %ds", StoreRetryAfter),
			Data:    map[string]any{"detail": err.Error(), "retryAfterSeconds": StoreRetryAfter},
		}
	}
	if errors.Is(err, tasks.ErrCallerQuota) {
		return &RPCError{Code: CodeServerError, Message: "your task quota is full of running tasks; retry when one of them ends"}
	}
	for _, ec := range errorCodes {
		if errors.Is(err, ec.err) {
			return &RPCError{Code: ec.code, Message: ec.err.Error(), Data: map[string]any{"detail": err.Error()}}
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &RPCError{Code: CodeInternalError, Message: "request ended before the result: " + err.Error()}
	}
	return &RPCError{Code: CodeInternalError, Message: "internal error"}
}

// invalidParams is the JSON-RPC invalid-params error for err: the message
// says what err says (which field, what is wrong), and so does the detail.
func invalidParams(err error) error {
	return &RPCError{Code: CodeInvalidParams, Message: "invalid params: " + err.Error(), Data: map[string]any{"detail": err.Error()}}
}

// validID reports whether a JSON-RPC id is a string, a number or null.
func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return true // absent
	}
	switch id[0] {
	case '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case 'n':
		return string(id) == "null"
	default:
		_, err := strconv.ParseFloat(string(id), 64)
		return err == nil
	}
}

// Method is one operator-provided JSON-RPC method, served whatever the
// request's A2A-Version says; it decodes its own params.
type Method func(ctx context.Context, params json.RawMessage) (any, error)

// rpcHandler serves the JSON-RPC endpoint.
type rpcHandler struct {
	h          a2asrv.RequestHandler
	methods    map[string]rpcMethod        // the method table (methodTable)
	names      map[string]string           // each of its names, by itself (methodName)
	maxMessage int                         // the largest message admitted, encoded (Config.MaxMessage)
	maxBody    int64                       // BodyLimit(maxMessage)
	reserve    func(int64) (func(), error) // Config.ReserveMessage; nil reserves nothing
	keepAlive  time.Duration               // SSE comment interval on idle streams
}

// bodyBufs recycles request body and response buffers: nothing decoded from a
// body keeps a reference into it (json.Unmarshal copies), and a response is
// copied into the connection's buffer by Write, so a buffer is reused once
// its request is answered.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest body buffer kept for reuse.
const maxPooledBody = 64 << 10

func (rh *rpcHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		w.Header().Set("Accept-Post", "application/json")
		httpError(w, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	release, err := rh.reserveBody(r)
	if err != nil {
		shape := toRPCError
		if v, _ := requestVersion(r.Header); v == a2av1.Version {
			shape = toV1Error
		}
		writeRPC(w, nullID, nil, err, shape)
		return
	}
	defer release()
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBody {
			bodyBufs.Put(buf)
		}
	}()
	if err := rh.readBody(w, r, buf); err != nil {
		switch {
		case errors.Is(err, errBodyTooLarge):
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		case errors.Is(err, errBodyTimeout):
			httpError(w, http.StatusRequestTimeout, err.Error())
		default:
			writeRPC(w, nullID, nil, &RPCError{Code: CodeParseError, Message: "could not read the request body"}, toRPCError)
		}
		return // a deadline that passed stays: the rest of the body is not waited for
	}
	raw := bytes.TrimSpace(buf.Bytes())
	if len(raw) > 0 && raw[0] == '[' {
		writeRPC(w, nullID, nil, &RPCError{Code: CodeInvalidRequest, Message: "batch requests are not supported"}, toRPCError)
		return
	}
	env, err := readEnvelope(raw)
	if err != nil {
		var se *strictError
		if errors.As(err, &se) && se.kind == strictSyntax {
			writeRPC(w, nullID, nil, &RPCError{Code: CodeParseError, Message: "parse error", Data: map[string]any{"detail": err.Error()}}, toRPCError)
			return
		}
		writeRPC(w, nullID, nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: " + err.Error(), Data: map[string]any{"detail": err.Error()}}, toRPCError)
		return
	}
	// The spans alias the pooled body buffer; the id outlives no request,
	// but it is tiny, so it is copied all the same.
	id := json.RawMessage(bytes.Clone(env.id))
	if !validID(id) {
		writeRPC(w, nullID, nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: id must be a string, a number or null"}, toRPCError)
		return
	}
	if len(id) == 0 {
		id = nullID
	}
	okVersion := string(env.jsonrpc) == `"2.0"` // as every client writes it; else read as JSON reads it
	if !okVersion {
		version, ok := stringValue(env.jsonrpc)
		okVersion = ok && version == "2.0"
	}
	method, okMethod := rh.methodName(env.method)
	if !okVersion || !okMethod || method == "" {
		writeRPC(w, id, nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: want jsonrpc \"2.0\" and a method name"}, toRPCError)
		return
	}
	telemetry.NoteRPCMethod(w, rh.metricMethod(method))
	rh.serveMethod(w, r, id, method, env.params)
}

// methodName is the request's method, as stringValue reads it; a name of
// the method table is the table's own string, not a copy of the body's.
func (rh *rpcHandler) methodName(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		if name, ok := rh.names[string(raw[1:len(raw)-1])]; ok {
			return name, true
		}
	}
	return stringValue(raw)
}

// writeSSE streams events as server-sent events, each a JSON-RPC response
// with the request's id: conv shapes a result, errConv an error (which ends
// the stream). An idle stream gets an SSE comment every keepAlive so proxies
// and clients with read timeouts keep it open. A stream whose first item is
// an error is no stream when plainErrors is set (A2A 1.0): it is one plain
// JSON-RPC error response (application/json), as for a unary method;
// otherwise (A2A 0.3) the error is the stream's one event. A first item that
// is a shed (the service is at capacity) is answered as any shed request is,
// HTTP 429 with Retry-After and the JSON-RPC error, either way.
func (rh *rpcHandler) writeSSE(w http.ResponseWriter, r *http.Request, id json.RawMessage, events iter.Seq2[a2a.Event, error], conv func(a2a.Event) any, errConv func(error) *RPCError, plainErrors bool) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeRPC(w, id, nil, &RPCError{Code: CodeInternalError, Message: "streaming is not supported on this connection"}, errConv)
		return
	}
	type item struct {
		ev  a2a.Event
		err error
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	items := make(chan item)
	go func() {
		defer close(items)
		for ev, err := range events {
			select {
			case items <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var first *item
	select {
	case v, more := <-items:
		if more {
			first = &v
		}
	case <-ctx.Done():
		return
	}
	if first != nil && first.err != nil {
		if plainErrors || errConv(first.err).retryAfter > 0 {
			writeRPC(w, id, nil, first.err, errConv)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	if first == nil {
		return
	}
	keepAlive := rh.keepAlive
	if keepAlive <= 0 {
		keepAlive = DefaultSSEKeepAlive
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	seq := 0
	for {
		var it item
		if first != nil {
			it, first = *first, nil
		} else {
			select {
			case v, more := <-items:
				if !more {
					return
				}
				it = v
			case <-tick.C:
				if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
					return
				}
				flusher.Flush()
				continue
			case <-ctx.Done():
				return
			}
		}
		seq++
		resp := rpcResponse{JSONRPC: "2.0", ID: id}
		if it.err != nil {
			resp.Error = errConv(it.err)
			telemetry.NoteRPCCode(w, resp.Error.Code)
		} else {
			resp.Result = conv(it.ev)
		}
		b, merr := json.Marshal(resp)
		if merr != nil {
			return
		}
		if _, werr := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, b); werr != nil {
			return
		}
		flusher.Flush()
		if it.err != nil {
			return
		}
	}
}

// nilPointer reports whether v is a nil pointer (whose value-receiver
// MarshalJSON would panic; json.Marshal writes null).
func nilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// writeResult writes a JSON-RPC answer whose result is what fill appends to
// the pooled buffer it is given, in the envelope json.Marshal would write;
// if fill reports false nothing is written.
func writeResult(w http.ResponseWriter, id json.RawMessage, fill func([]byte) ([]byte, bool)) bool {
	out := bodyBufs.Get().(*bytes.Buffer)
	defer func() {
		if out.Cap() <= maxPooledBody {
			bodyBufs.Put(out)
		}
	}()
	out.Reset()
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	json.HTMLEscape(out, id) // as json.Marshal writes it
	out.WriteString(`,"result":`)
	b, ok := fill(out.AvailableBuffer())
	if !ok {
		return false
	}
	out.Write(b)
	out.WriteByte('}')
	w.Header().Set("Content-Type", "application/json")
	w.Write(out.Bytes()) // copied into the connection's buffer
	return true
}

// writeRPC writes one JSON-RPC response: the error, shaped by shape for the
// method's protocol version, or else the result.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, err error, shape func(error) *RPCError) {
	if t, ok := result.(*a2a.Task); ok && err == nil && t != nil && len(id) > 0 && validID(id) {
		// The A2A 0.3 task (message/send, tasks/get): encoded by
		// appendTask03, as a2a-go's MarshalJSON would, straight into the
		// answer's buffer. A task MarshalJSON cannot encode either: the
		// ordinary path reports it.
		if writeResult(w, id, func(b []byte) ([]byte, bool) { return appendTask03(b, t) }) {
			return
		}
	}
	if err == nil {
		if m, ok := result.(json.Marshaler); ok && len(id) > 0 && validID(id) && !nilPointer(result) {
			// The A2A types marshal themselves (with json.Marshal, so the
			// output is compact and HTML-escaped): write the envelope around
			// that output instead of having encoding/json scan and copy it
			// again.
			if b, err := m.MarshalJSON(); err == nil && len(b) > 0 {
				writeResult(w, id, func(out []byte) ([]byte, bool) { return append(out, b...), true })
				return
			}
		}
	}
	resp := rpcResponse{JSONRPC: "2.0", ID: id}
	if err != nil {
		resp.Error = shape(err)
		telemetry.NoteRPCCode(w, resp.Error.Code)
	} else {
		telemetry.NoteRPCCode(w, 0)
		if result == nil {
			result = json.RawMessage("null")
		}
		resp.Result = result
	}
	b, merr := json.Marshal(resp)
	if merr != nil {
		b, _ = json.Marshal(rpcResponse{JSONRPC: "2.0", ID: id, Error: &RPCError{Code: CodeInternalError, Message: "could not encode the result"}})
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.Error != nil && resp.Error.retryAfter > 0 {
		// A shed (shed.go): the answer says when to come back.
		w.Header().Set("Retry-After", strconv.Itoa(resp.Error.retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(b)
}
