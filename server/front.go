package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// What the front admits before a method runs: the content type, the body
// size, the message size and the metadata a caller may set.

// BodyEnvelope is the room a request body has beyond the message it carries:
// the JSON-RPC envelope, the send configuration, the request's metadata,
// whitespace. A body over BodyLimit(max message) is refused with 413.
const BodyEnvelope = 1 << 20

// BodyLimit returns the request body cap for a message size limit:
// maxMessage plus BodyEnvelope.
func BodyLimit(maxMessage int) int64 { return int64(maxMessage) + BodyEnvelope }

// checkContentType admits a JSON-RPC request body only as JSON: a media type
// of application/json or any application/...+json (application/a2a+json), in
// UTF-8 if a charset is named. A missing Content-Type is refused too: a web
// page can POST a body without one (a Blob with no type) without a CORS
// preflight, just as it can text/plain or a form, and every A2A client
// (a2a-go, the JavaScript SDK, the TCK) sends application/json.
func checkContentType(ct string) error {
	switch ct {
	case "application/json", "application/json; charset=utf-8": // what clients send: no parse
		return nil
	case "":
		return errors.New("the request has no Content-Type: send application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("Content-Type %q does not parse: send application/json", ct)
	}
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return fmt.Errorf("Content-Type %q is not JSON: send application/json", mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return fmt.Errorf("Content-Type charset %q: JSON is UTF-8", cs)
	}
	return nil
}

// The refusals of readBody.
var (
	errBodyTooLarge = errors.New("server: request body over the limit")
	errBodyTimeout  = errors.New("server: request body not received within the body deadline")
)

// reserveBody asks Config.ReserveMessage for the memory a body may cost
// before it is read: its Content-Length, or the body limit when the length is
// not given (chunked). It returns the release, or the shed error to answer.
func (rh *rpcHandler) reserveBody(r *http.Request) (release func(), err error) {
	if rh.reserve == nil {
		return func() {}, nil
	}
	n := r.ContentLength
	if n < 0 || n > rh.maxBody {
		n = rh.maxBody
	}
	return rh.reserve(n)
}

// readBody reads a request's body into buf, at most rh.maxBody bytes: a
// bigger one is errBodyTooLarge (its message names the limits), one that
// does not arrive within the body deadline (a trickle) errBodyTimeout, and
// the connection then goes too (Connection: close; the deadline that passed
// stays, so the rest is not waited for). Once the body is in, the body
// deadline is lifted (bodyRead). Both bindings read their bodies here.
func (rh *rpcHandler) readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) error {
	body := http.MaxBytesReader(w, r.Body, rh.maxBody)
	if n := r.ContentLength; n > 0 && n <= rh.maxBody {
		buf.Grow(int(n) + bytes.MinRead) // one read to EOF, no regrowth
	}
	_, err := buf.ReadFrom(body)
	if err == nil {
		bodyRead(w)
		return nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &bodyError{errBodyTooLarge, fmt.Sprintf("request body over the %d-byte limit (the message size limit, %d bytes, plus %d for the request around the message)", rh.maxBody, rh.maxMessage, BodyEnvelope)}
	case isTimeout(err):
		w.Header().Set("Connection", "close")
		return &bodyError{errBodyTimeout, "request body not received within the body deadline"}
	}
	return fmt.Errorf("read the request body: %w", err)
}

// bodyError is a refusal of readBody: its kind, and the message its answer
// carries.
type bodyError struct {
	kind error
	msg  string
}

func (e *bodyError) Error() string        { return e.msg }
func (e *bodyError) Is(target error) bool { return target == e.kind }

// bodyRead lifts the body deadline (ConnLimits.BodyTimeout) once the body is
// in: a long answer (a blocking send, an event stream) must not meet a read
// deadline meant for the body, which would cancel the request's context.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// isTimeout reports whether err is a read that hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// errMessageTooLarge refuses a message over the message size limit; the
// error names the limit.
func errMessageTooLarge(size, limit int) error {
	msg := fmt.Sprintf("the message is %d bytes, over this service's message size limit of %d bytes (--max-message)", size, limit)
	return &RPCError{Code: CodeInvalidParams, Message: "invalid params: " + msg,
		Data: map[string]any{"detail": msg, "sizeBytes": size, "limitBytes": limit}}
}

// maxExpansion bounds how much larger a message's encoding (encoding/json's,
// as the spawn payload carries it) can be than the params it was decoded
// from: one byte of '<', '>' or '&' encodes as six (\u003c), and a number such
// as 1e20 as its 21 digits. Params smaller than the limit divided by this
// cannot carry a message over it, so they are not measured.
const maxExpansion = 6

// admitMessage checks the message of a send before the engine sees it: the
// reserved metadata a caller may not set is removed (from the message's and
// the request's metadata), and a message over the size limit is refused.
func (rh *rpcHandler) admitMessage(p *a2a.MessageSendParams, rawParams []byte) error {
	p.Metadata = stripReserved(p.Metadata)
	if p.Message == nil {
		return nil // the engine refuses it
	}
	p.Message.Metadata = stripReserved(p.Message.Metadata)
	if len(rawParams) <= rh.maxMessage/maxExpansion {
		return nil
	}
	b, err := json.Marshal(p.Message)
	if err != nil {
		return invalidParams(fmt.Errorf("message does not encode: %w", err))
	}
	if len(b) > rh.maxMessage {
		return errMessageTooLarge(len(b), rh.maxMessage)
	}
	return nil
}

// stripReserved returns meta without the keys a caller may not set
// (api.CallerMaySet decides: every agentd/ key but the mesh metadata another
// agentd sends, the routing hints and the admission priority). So
// agentd/caller, agentd/parent_task, agentd/agent_path and the rest are only
// ever what agentd wrote. meta is not modified; it is returned as it is when
// it holds no such key.
func stripReserved(meta map[string]any) map[string]any {
	reserved := func(k string) bool { return !api.CallerMaySet(k) }
	for k := range meta {
		if reserved(k) {
			out := maps.Clone(meta)
			maps.DeleteFunc(out, func(k string, _ any) bool { return reserved(k) })
			return out
		}
	}
	return meta
}
