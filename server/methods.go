package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
)

// rpcMethod is one entry of the JSON-RPC method table. version is the A2A
// protocol version the method belongs to (it shapes the method's errors and
// events and marks the request's context), or "" for an operator method,
// served whatever the request's A2A-Version says. decode turns the request's
// params into the argument of call (a unary method) or events (a streaming
// one); it is the only place a method's params are decoded and checked.
type rpcMethod struct {
	version string
	decode  func(raw json.RawMessage) (any, error)
	call    func(ctx context.Context, h a2asrv.RequestHandler, arg any) (any, error)
	events  func(ctx context.Context, h a2asrv.RequestHandler, arg any) iter.Seq2[a2a.Event, error]
}

// paramsMode says how a method's params are decoded.
type paramsMode int

const (
	paramsObject   paramsMode = iota // an object is required
	paramsOptional                   // absent means {}; else an object
	paramsIgnored                    // the method takes none; whatever is sent is ignored
	paramsStrict                     // absent or null means none; else an object without unknown fields
)

// decodeParams decodes a method's params into v as mode says: the one decoder
// of every method's params. A value of the wrong shape is invalid params, and
// so is a name given twice or spelled in another case than the field it
// would set (checkJSON).
func decodeParams(raw json.RawMessage, v any, mode paramsMode) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case mode == paramsIgnored:
		return nil
	case len(raw) == 0 && mode == paramsOptional:
		raw = json.RawMessage("{}")
	case mode == paramsStrict && (len(raw) == 0 || string(raw) == "null"):
		return nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return invalidParams(errors.New("params must be an object"))
	}
	// Names are matched exactly and given once (strict.go), before
	// encoding/json, which would match them ignoring case, sees them.
	if err := checkJSON(raw, schemaOf(reflect.TypeOf(v))); err != nil {
		var se *strictError
		if errors.As(err, &se) && se.kind != strictSyntax {
			se.path = strings.TrimSuffix("params."+se.path, ".")
		}
		return invalidParams(err)
	}
	if p, ok := v.(*a2a.MessageSendParams); ok && mode != paramsStrict && decodeSendFast(raw, p) {
		return nil // the common send, decoded as json.Unmarshal would
	}
	if mode != paramsStrict {
		if err := json.Unmarshal(raw, v); err != nil {
			return invalidParams(err)
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidParams(err)
	}
	if dec.More() {
		return invalidParams(errors.New("trailing data after params"))
	}
	return nil
}

// decoder is the decode of an entry whose params have type P, decoded as mode
// says, and turned into the handler's argument A by prepare, which checks what
// the protocol version's wire model requires beyond the handler's own checks.
func decoder[P, A any](mode paramsMode, prepare func(*P) (A, error)) func(json.RawMessage) (any, error) {
	return func(raw json.RawMessage) (any, error) {
		var p P
		if err := decodeParams(raw, &p, mode); err != nil {
			return nil, err
		}
		return prepare(&p)
	}
}

// unary is the entry of a method answered with one result. serve is called
// as a method expression of the handler would be (a2asrv.RequestHandler.OnGetTask).
func unary[P, A, R any](version string, mode paramsMode, prepare func(*P) (A, error), serve func(a2asrv.RequestHandler, context.Context, A) (R, error)) rpcMethod {
	return rpcMethod{
		version: version,
		decode:  decoder(mode, prepare),
		call: func(ctx context.Context, h a2asrv.RequestHandler, arg any) (any, error) {
			res, err := serve(h, ctx, arg.(A))
			if err != nil {
				return nil, err
			}
			return res, nil
		},
	}
}

// streaming is the entry of a method answered with a stream of events; its
// params are an object.
func streaming[P, A any](version string, prepare func(*P) (A, error), serve func(a2asrv.RequestHandler, context.Context, A) iter.Seq2[a2a.Event, error]) rpcMethod {
	return rpcMethod{
		version: version,
		decode:  decoder(paramsObject, prepare),
		events: func(ctx context.Context, h a2asrv.RequestHandler, arg any) iter.Seq2[a2a.Event, error] {
			return serve(h, ctx, arg.(A))
		},
	}
}

// asIs is the prepare of an A2A 0.3 method: its params are the handler's
// argument, and the handler (the task engine) checks them.
func asIs[P any](p *P) (*P, error) { return p, nil }

// operatorMethod is the entry of an a2a.* operator method, which decodes its
// own params (decodeParams with paramsStrict).
func operatorMethod(m Method) rpcMethod {
	return rpcMethod{
		decode: func(raw json.RawMessage) (any, error) { return raw, nil },
		call: func(ctx context.Context, _ a2asrv.RequestHandler, arg any) (any, error) {
			return m(ctx, arg.(json.RawMessage))
		},
	}
}

// methods03 are the A2A 0.3 methods: their params are the handler's own
// types, which the handler checks.
var methods03 = map[string]rpcMethod{
	MethodSend:        unary(tasks.Version03, paramsObject, asIs[a2a.MessageSendParams], a2asrv.RequestHandler.OnSendMessage),
	MethodStream:      streaming(tasks.Version03, asIs[a2a.MessageSendParams], a2asrv.RequestHandler.OnSendMessageStream),
	MethodGet:         unary(tasks.Version03, paramsObject, asIs[a2a.TaskQueryParams], a2asrv.RequestHandler.OnGetTask),
	MethodCancel:      unary(tasks.Version03, paramsObject, asIs[a2a.TaskIDParams], a2asrv.RequestHandler.OnCancelTask),
	MethodResubscribe: streaming(tasks.Version03, asIs[a2a.TaskIDParams], a2asrv.RequestHandler.OnResubscribeToTask),
	MethodPushSet:     unary(tasks.Version03, paramsObject, asIs[a2a.TaskPushConfig], a2asrv.RequestHandler.OnSetTaskPushConfig),
	MethodPushGet:     unary(tasks.Version03, paramsObject, asIs[a2a.GetTaskPushConfigParams], a2asrv.RequestHandler.OnGetTaskPushConfig),
	MethodPushList:    unary(tasks.Version03, paramsObject, asIs[a2a.ListTaskPushConfigParams], a2asrv.RequestHandler.OnListTaskPushConfig),
	MethodPushDelete: unary(tasks.Version03, paramsObject, asIs[a2a.DeleteTaskPushConfigParams],
		func(h a2asrv.RequestHandler, ctx context.Context, p *a2a.DeleteTaskPushConfigParams) (any, error) {
			return json.RawMessage("null"), h.OnDeleteTaskPushConfig(ctx, p)
		}),
	MethodExtCard: unary(tasks.Version03, paramsIgnored, asIs[struct{}],
		func(h a2asrv.RequestHandler, ctx context.Context, _ *struct{}) (*a2a.AgentCard, error) {
			return h.OnGetExtendedAgentCard(ctx)
		}),
}

// methodTable returns the method table of one handler: the A2A 0.3 and 1.0
// methods, and the operator methods (each for operators only, each call
// logged to log).
func methodTable(operator map[string]Method, log *slog.Logger) map[string]rpcMethod {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	table := make(map[string]rpcMethod, len(methods03)+len(methods10)+len(operator))
	for name, m := range methods03 {
		table[name] = m
	}
	for name, m := range methods10 {
		table[name] = m
	}
	for name, m := range operatorOnly(operator, log) {
		table[name] = operatorMethod(m)
	}
	return table
}

// serveMethod answers one JSON-RPC request for method (the envelope already
// read): it picks the table entry by name and the request's A2A-Version,
// decodes the params, and writes the result, the error or the event stream in
// the method's protocol version.
func (rh *rpcHandler) serveMethod(w http.ResponseWriter, r *http.Request, id json.RawMessage, method string, params json.RawMessage) {
	m, known := rh.methods[method]
	v1 := known && m.version == a2av1.Version
	version, verr := requestVersion(r.Header)
	switch {
	case known && m.version == "": // an operator method, whatever the version
	case verr != nil:
		shape := toRPCError
		if v1 {
			shape = toV1Error
		}
		writeRPC(w, id, nil, &RPCError{Code: CodeVersionNotSupported, Message: "version not supported", Data: map[string]any{"detail": verr.Error()}}, shape)
		return
	// A request without A2A-Version is 0.3 (A2A 1.0 §3.6.2) for every 0.3
	// method; a 1.0 method without it is served as 1.0, not refused: 0.3 has
	// no method of that name, so no 0.3 request changes meaning, and 1.0
	// clients that omit the header (the 1.0 TCK does) work.
	case v1 && version == tasks.Version03:
		writeRPC(w, id, nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + method + " is an A2A 1.0 method and the request declared A2A-Version 0.3"}, toRPCError)
		return
	case !v1 && version == a2av1.Version:
		writeRPC(w, id, nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + method + " is not an A2A 1.0 method (the request declared A2A-Version 1.0)"}, toV1Error)
		return
	case !known:
		writeRPC(w, id, nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + method}, toRPCError)
		return
	}
	ctx := r.Context()
	shape, event := toRPCError, func(ev a2a.Event) any { return ev }
	if m.version != "" {
		ctx = tasks.WithVersion(ctx, m.version)
	}
	if v1 {
		w.Header().Set(VersionHeader, a2av1.Version)
		shape, event = toV1Error, func(ev a2a.Event) any { return a2av1.EventFrom(ev) }
	}
	arg, err := rh.prepare(m, params)
	if m.events != nil {
		// An error found before the first event (bad params, an unknown or
		// ended task) is, for A2A 1.0, one plain JSON-RPC error response,
		// which 1.0 clients and the 1.0.0 TCK read; for A2A 0.3 it is the
		// one event of a stream, the form 0.3 clients read (a2a-go 0.3's
		// client takes a JSON body for an empty stream; the 0.3 TCK and the
		// JavaScript SDK 0.3 refuse it). writeSSE tells them apart.
		events := failed(err)
		if err == nil {
			events = m.events(ctx, rh.h, arg)
		}
		rh.writeSSE(w, r.WithContext(ctx), id, events, event, shape, v1)
		return
	}
	var res any
	if err == nil {
		res, err = m.call(ctx, rh.h, arg)
	}
	writeRPC(w, id, res, err, shape)
}

// prepare decodes a request's params for m into its handler's argument, and
// admits the message of a send (admitMessage): what every binding does
// before a method runs.
func (rh *rpcHandler) prepare(m rpcMethod, params json.RawMessage) (any, error) {
	arg, err := m.decode(params)
	if send, ok := arg.(*a2a.MessageSendParams); ok && err == nil {
		err = rh.admitMessage(send, params)
	}
	return arg, err
}

// failed is a stream of one error.
func failed(err error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
}
