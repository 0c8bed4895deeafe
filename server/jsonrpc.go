package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	a2abind "github.com/agentd/agentd/a2a"
)

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

// rpcRequest is a JSON-RPC request as received. ID stays raw so it is echoed
// exactly.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"`
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
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

// toRPCError turns a handler error into a JSON-RPC error with the right code.
func toRPCError(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, a2abind.ErrDraining) {
		return &RPCError{Code: CodeServerError, Message: err.Error()}
	}
	if errors.Is(err, a2abind.ErrStoreFull) {
		return &RPCError{Code: CodeServerError, Message: "agentd is at its task capacity; retry later"}
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

func invalidParams(err error) *RPCError {
	return &RPCError{Code: CodeInvalidParams, Message: "invalid params", Data: map[string]any{"detail": err.Error()}}
}

// decodeParams strictly decodes params into v: an object is required.
func decodeParams(raw json.RawMessage, v any) *RPCError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return invalidParams(errors.New("params must be an object"))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalidParams(err)
	}
	return nil
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

// Method is one operator-provided JSON-RPC method, dispatched before the A2A
// methods.
type Method func(ctx context.Context, params json.RawMessage) (any, error)

// rpcHandler serves the JSON-RPC endpoint.
type rpcHandler struct {
	h       a2asrv.RequestHandler
	extra   map[string]Method
	maxBody int64
}

func (rh *rpcHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := http.MaxBytesReader(w, r.Body, rh.maxBody)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body over the %d-byte limit", rh.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		writeRPC(w, nullID, nil, &RPCError{Code: CodeParseError, Message: "could not read the request body"})
		return
	}
	raw := bytes.TrimSpace(buf.Bytes())
	if len(raw) > 0 && raw[0] == '[' {
		writeRPC(w, nullID, nil, &RPCError{Code: CodeInvalidRequest, Message: "batch requests are not supported"})
		return
	}
	var req rpcRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || len(raw) == 0 {
			writeRPC(w, nullID, nil, &RPCError{Code: CodeParseError, Message: "parse error", Data: map[string]any{"detail": err.Error()}})
			return
		}
		writeRPC(w, nullID, nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request", Data: map[string]any{"detail": err.Error()}})
		return
	}
	id := req.ID
	if !validID(id) {
		writeRPC(w, nullID, nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: id must be a string, a number or null"})
		return
	}
	if len(id) == 0 {
		id = nullID
	}
	var method string
	if req.JSONRPC != "2.0" || json.Unmarshal(req.Method, &method) != nil || method == "" {
		writeRPC(w, id, nil, &RPCError{Code: CodeInvalidRequest, Message: "invalid request: want jsonrpc \"2.0\" and a method name"})
		return
	}
	ctx := r.Context()
	if m, ok := rh.extra[method]; ok {
		res, err := m(ctx, req.Params)
		if err != nil {
			writeRPC(w, id, nil, toRPCError(err))
			return
		}
		writeRPC(w, id, res, nil)
		return
	}
	switch method {
	case MethodStream, MethodResubscribe:
		rh.serveStream(w, r, id, method, req.Params)
		return
	}
	res, rerr := rh.call(ctx, method, req.Params)
	writeRPC(w, id, res, rerr)
}

// call dispatches one non-streaming A2A method.
func (rh *rpcHandler) call(ctx context.Context, method string, params json.RawMessage) (any, *RPCError) {
	wrap := func(res any, err error) (any, *RPCError) {
		if err != nil {
			return nil, toRPCError(err)
		}
		return res, nil
	}
	switch method {
	case MethodSend:
		var p a2a.MessageSendParams
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if err := a2abind.ValidateSendParams(&p); err != nil {
			return nil, toRPCError(err)
		}
		return wrap(rh.h.OnSendMessage(ctx, &p))
	case MethodGet:
		var p a2a.TaskQueryParams
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		return wrap(rh.h.OnGetTask(ctx, &p))
	case MethodCancel:
		var p a2a.TaskIDParams
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		return wrap(rh.h.OnCancelTask(ctx, &p))
	case MethodPushSet:
		var p a2a.TaskPushConfig
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		return wrap(rh.h.OnSetTaskPushConfig(ctx, &p))
	case MethodPushGet:
		var p a2a.GetTaskPushConfigParams
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		return wrap(rh.h.OnGetTaskPushConfig(ctx, &p))
	case MethodPushList:
		var p a2a.ListTaskPushConfigParams
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		return wrap(rh.h.OnListTaskPushConfig(ctx, &p))
	case MethodPushDelete:
		var p a2a.DeleteTaskPushConfigParams
		if e := decodeParams(params, &p); e != nil {
			return nil, e
		}
		if err := rh.h.OnDeleteTaskPushConfig(ctx, &p); err != nil {
			return nil, toRPCError(err)
		}
		return json.RawMessage("null"), nil
	case MethodExtCard:
		return wrap(rh.h.OnGetExtendedAgentCard(ctx))
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + method}
}

// serveStream answers message/stream and tasks/resubscribe with server-sent
// events, one JSON-RPC response per event. Errors found before the stream
// starts are a plain JSON-RPC error response.
func (rh *rpcHandler) serveStream(w http.ResponseWriter, r *http.Request, id json.RawMessage, method string, params json.RawMessage) {
	ctx := r.Context()
	var events iter.Seq2[a2a.Event, error]
	switch method {
	case MethodStream:
		var p a2a.MessageSendParams
		if e := decodeParams(params, &p); e != nil {
			writeRPC(w, id, nil, e)
			return
		}
		if err := a2abind.ValidateSendParams(&p); err != nil {
			writeRPC(w, id, nil, toRPCError(err))
			return
		}
		events = rh.h.OnSendMessageStream(ctx, &p)
	default:
		var p a2a.TaskIDParams
		if e := decodeParams(params, &p); e != nil {
			writeRPC(w, id, nil, e)
			return
		}
		events = rh.h.OnResubscribeToTask(ctx, &p)
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeRPC(w, id, nil, &RPCError{Code: CodeInternalError, Message: "streaming is not supported on this connection"})
		return
	}
	next, stop := iter.Pull2(events)
	defer stop()
	ev, err, more := next()
	if !more {
		writeRPC(w, id, nil, &RPCError{Code: CodeInternalError, Message: "the stream ended before any event"})
		return
	}
	if err != nil {
		// Nothing was streamed yet: answer like a non-streaming call.
		writeRPC(w, id, nil, toRPCError(err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	seq := 0
	for {
		seq++
		resp := rpcResponse{JSONRPC: "2.0", ID: id}
		if err != nil {
			resp.Error = toRPCError(err)
		} else {
			resp.Result = ev
		}
		b, merr := json.Marshal(resp)
		if merr != nil {
			return
		}
		if _, werr := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, b); werr != nil {
			return
		}
		flusher.Flush()
		if err != nil {
			return
		}
		ev, err, more = next()
		if !more {
			return
		}
	}
}

func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *RPCError) {
	resp := rpcResponse{JSONRPC: "2.0", ID: id}
	if rerr != nil {
		resp.Error = rerr
	} else {
		if result == nil {
			result = json.RawMessage("null")
		}
		resp.Result = result
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(rpcResponse{JSONRPC: "2.0", ID: id, Error: &RPCError{Code: CodeInternalError, Message: "could not encode the result"}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
