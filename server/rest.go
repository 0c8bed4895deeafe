package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2arest"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/telemetry"
)

// restHandler serves A2A 1.0's HTTP+JSON binding (package a2arest) on the
// same listener as the JSON-RPC endpoint, behind the same authentication
// (Handler wraps it in Auth.Middleware and telemetry.ServeA2A as it wraps
// the endpoint): a route's request becomes the params object of the same
// 1.0 method (a2arest.Params), which the JSON-RPC method table decodes,
// admits (prepare: the byte budgets, the reserved metadata) and serves
// through the same RequestHandler, so the admission, the quotas and the
// authorization of tasks are the engine's, whatever the binding. Only the
// answer's shape differs: HTTP statuses and the AIP-193 error body
// (a2arest.StatusOf), and event streams whose data is the bare
// StreamResponse.
type restHandler struct {
	rh *rpcHandler
}

func (h restHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, path, allow, err := a2arest.Match(r.Method, r.URL.EscapedPath())
	switch {
	case errors.Is(err, a2arest.ErrMethod):
		telemetry.NoteRPCMethod(w, "unknown")
		a2arest.MethodNotAllowed(w, r, allow)
		return
	case err != nil:
		telemetry.NoteRPCMethod(w, "unknown")
		a2arest.NotFound(w, r)
		return
	}
	telemetry.NoteRPCMethod(w, rt.Op)
	w.Header().Set(VersionHeader, a2av1.Version)
	// The binding is A2A 1.0's (0.3's HTTP+JSON routes were others, under
	// /v1): a request without A2A-Version is served as 1.0, one that names
	// another version is refused.
	if v, verr := requestVersion(r.Header); verr != nil || v == tasks.Version03 {
		msg := "this agent serves A2A " + a2av1.Version + " over HTTP+JSON"
		if verr != nil {
			msg = verr.Error()
		}
		h.writeError(w, &RPCError{Code: CodeVersionNotSupported, Message: "version not supported", Data: map[string]any{"detail": msg}})
		return
	}
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBody {
			bodyBufs.Put(buf)
		}
	}()
	if r.ContentLength != 0 { // a body, of a length or chunked
		release, err := h.rh.reserveBody(r)
		if err != nil {
			h.writeError(w, err)
			return
		}
		defer release()
		if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
			w.Header().Set("Accept-Post", "application/json")
			st := a2arest.StatusOf(CodeInvalidRequest, err.Error(), nil, 0)
			st.Code = http.StatusUnsupportedMediaType
			telemetry.NoteRPCCode(w, CodeInvalidRequest)
			a2arest.WriteError(w, st, 0)
			return
		}
		if err := h.rh.readBody(w, r, buf); err != nil {
			st := a2arest.StatusOf(CodeInvalidRequest, err.Error(), nil, 0)
			switch {
			case errors.Is(err, errBodyTooLarge):
				st.Code, st.Status = http.StatusRequestEntityTooLarge, "RESOURCE_EXHAUSTED"
			case errors.Is(err, errBodyTimeout):
				st.Code, st.Status = http.StatusRequestTimeout, "DEADLINE_EXCEEDED"
			}
			telemetry.NoteRPCCode(w, CodeInvalidRequest)
			a2arest.WriteError(w, st, 0)
			return
		}
	}
	params, err := a2arest.Params(rt, path, r.URL.Query(), buf.Bytes())
	if err != nil {
		h.writeError(w, invalidParams(err))
		return
	}
	m := h.rh.methods[rt.Op]
	ctx := tasks.WithVersion(r.Context(), a2av1.Version)
	arg, err := h.rh.prepare(m, params)
	if m.events != nil {
		a2arest.WriteStream(ctx, w, func(ctx context.Context) iter.Seq2[a2a.Event, error] {
			if err != nil {
				return failed(err)
			}
			return m.events(ctx, h.rh.h, arg)
		}, h.rh.keepAlive, func(err error) (a2arest.Status, int) { return restStatus(w, err) })
		return
	}
	var res any
	if err == nil {
		res, err = m.call(ctx, h.rh.h, arg)
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		h.writeError(w, errors.New("could not encode the result"))
		return
	}
	telemetry.NoteRPCCode(w, 0)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// writeError answers err in the binding's shape.
func (h restHandler) writeError(w http.ResponseWriter, err error) {
	st, retry := restStatus(w, err)
	a2arest.WriteError(w, st, retry)
}

// restStatus shapes err as the 1.0 JSON-RPC binding does (toV1Error: the
// same code, message and ErrorInfo) and maps it to the HTTP+JSON binding's
// status; it notes the code for the request's metrics.
func restStatus(w http.ResponseWriter, err error) (a2arest.Status, int) {
	re := toV1Error(err)
	telemetry.NoteRPCCode(w, re.Code)
	details, _ := re.Data.([]any)
	return a2arest.StatusOf(re.Code, re.Message, details, re.retryAfter), re.retryAfter
}
