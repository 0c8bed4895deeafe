package telemetry

import (
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// RPCNoter is implemented by the http.ResponseWriter that ServeA2A hands to
// the JSON-RPC handler: the handler notes the method it dispatched (already
// reduced to a bounded set of names) and the JSON-RPC error code it answered
// with (0 for a result), for the request's span and metrics.
type RPCNoter interface {
	NoteRPCMethod(method string)
	NoteRPCCode(code int)
}

// NoteRPCMethod tells w's RPCNoter, if it is one, the request's method.
func NoteRPCMethod(w http.ResponseWriter, method string) {
	if n, ok := w.(RPCNoter); ok {
		n.NoteRPCMethod(method)
	}
}

// NoteRPCCode tells w's RPCNoter, if it is one, the JSON-RPC error code of the
// answer (0 for a result).
func NoteRPCCode(w http.ResponseWriter, code int) {
	if n, ok := w.(RPCNoter); ok {
		n.NoteRPCCode(code)
	}
}

// ServeA2A wraps the A2A JSON-RPC endpoint: each request gets a server span
// whose parent is the W3C traceparent in its headers (so a peer's delegation
// and the work it causes here are one trace), named after the JSON-RPC method
// once the handler notes it, and is counted in m (nil counts nothing) by
// method and code, with its duration.
func ServeA2A(m *Metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := ExtractHTTP(r.Context(), r.Header)
		ctx, span := Tracer().Start(ctx, "a2a", serverSpanOptions(r.Method)...)
		rec := &rpcRecorder{ResponseWriter: w}
		defer func() {
			method := rec.method
			if method == "" {
				method = "none"
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			code := CodeLabel(rec.code, rec.codeSet, status)
			if span.IsRecording() { // a span that records nothing takes nothing: build nothing for it
				span.SetName(method)
				span.SetAttributes(attribute.String("rpc.method", method), attribute.Int("http.response.status_code", status))
				if rec.codeSet && rec.code != 0 {
					span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", rec.code))
					span.SetStatus(codes.Error, "JSON-RPC error "+strconv.Itoa(rec.code))
				} else if status >= 400 {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
			}
			span.End()
			m.ObserveRequest(method, code, time.Since(start))
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// serverSpanOptions are the start options of the server span of a request
// of this HTTP method: built once for the methods the endpoints serve
// (options are immutable, so the spans share them), else for the request.
func serverSpanOptions(method string) []trace.SpanStartOption {
	switch method {
	case http.MethodPost:
		return postSpanOptions
	case http.MethodGet:
		return getSpanOptions
	}
	return newServerSpanOptions(method)
}

var (
	postSpanOptions = newServerSpanOptions(http.MethodPost)
	getSpanOptions  = newServerSpanOptions(http.MethodGet)
)

func newServerSpanOptions(method string) []trace.SpanStartOption {
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "jsonrpc"), attribute.String("http.request.method", method))}
}

// rpcRecorder is the ResponseWriter ServeA2A passes on: it remembers the
// status, the noted method and code, and still flushes (SSE streams).
type rpcRecorder struct {
	http.ResponseWriter
	status  int
	method  string
	code    int
	codeSet bool
}

func (r *rpcRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *rpcRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer, when it can.
func (r *rpcRecorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (r *rpcRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *rpcRecorder) NoteRPCMethod(method string) { r.method = method }

func (r *rpcRecorder) NoteRPCCode(code int) {
	if !r.codeSet || r.code == 0 {
		r.code, r.codeSet = code, true
	}
}
