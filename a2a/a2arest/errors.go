package a2arest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2av1"
)

// The error mapping of the binding (the specification's sections 5.4 and
// 11.6): each A2A error, by its JSON-RPC code, has an HTTP status, a
// google.rpc.Code name for the body's status (the gRPC binding's status of
// the same error) and the reason its google.rpc.ErrorInfo carries.
type errorKind struct {
	code     int    // the JSON-RPC code
	http     int    // the HTTP status
	status   string // the google.rpc.Code name
	reason   string // ErrorInfo.reason
	sentinel error  // a2a-go's sentinel, for the client
}

var errorKinds = []errorKind{
	{-32001, http.StatusNotFound, "NOT_FOUND", "TASK_NOT_FOUND", a2a.ErrTaskNotFound},
	{-32002, http.StatusConflict, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", a2a.ErrTaskNotCancelable},
	{-32003, http.StatusBadRequest, "UNIMPLEMENTED", "PUSH_NOTIFICATION_NOT_SUPPORTED", a2a.ErrPushNotificationNotSupported},
	{-32004, http.StatusBadRequest, "UNIMPLEMENTED", "UNSUPPORTED_OPERATION", a2a.ErrUnsupportedOperation},
	{-32005, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED", a2a.ErrUnsupportedContentType},
	{-32006, http.StatusBadGateway, "INTERNAL", "INVALID_AGENT_RESPONSE", a2a.ErrInvalidAgentResponse},
	{-32007, http.StatusBadRequest, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED", a2a.ErrAuthenticatedExtendedCardNotConfigured},
	{-32008, http.StatusBadRequest, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED", a2acall.ErrExtensionRequired},
	{-32009, http.StatusBadRequest, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED", a2acall.ErrVersionNotSupported},
	// JSON-RPC's own codes, for the same failures on this binding.
	{-32700, http.StatusBadRequest, "INVALID_ARGUMENT", "PARSE_ERROR", a2a.ErrParseError},
	{-32600, http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_REQUEST", a2a.ErrInvalidRequest},
	{-32601, http.StatusNotFound, "NOT_FOUND", "METHOD_NOT_FOUND", a2a.ErrMethodNotFound},
	{-32602, http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_PARAMS", a2a.ErrInvalidParams},
	{-32603, http.StatusInternalServerError, "INTERNAL", "INTERNAL", a2a.ErrInternalError},
	// agentd's server errors (draining, at task capacity, the store down):
	// the service cannot take the request now.
	{-32000, http.StatusServiceUnavailable, "UNAVAILABLE", "UNAVAILABLE", a2a.ErrServerError},
}

func kindOf(code int) errorKind {
	for _, k := range errorKinds {
		if k.code == code {
			return k
		}
	}
	return errorKind{code: code, http: http.StatusInternalServerError, status: "INTERNAL", reason: "INTERNAL"}
}

// HTTPStatus returns the HTTP status of the A2A error with this JSON-RPC
// code; an unknown code is 500.
func HTTPStatus(code int) int { return kindOf(code).http }

// Status is the error body's one member (google.rpc.Status in AIP-193's
// HTTP/JSON form): the HTTP status code, its google.rpc.Code name, the
// message, and the details (a google.rpc.ErrorInfo first).
type Status struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Details []any  `json:"details,omitempty"`
}

// ErrorBody is the body of every error answer: {"error": Status}.
type ErrorBody struct {
	Error Status `json:"error"`
}

// StatusOf shapes an A2A error for this binding: code is its JSON-RPC code,
// details the 1.0 error data (a2av1.ErrorData's array, whose ErrorInfo
// carries the detail). When details hold no ErrorInfo, one with the code's
// reason is added, so a client always finds the A2A error type.
// retryAfter, when positive, makes the status 429 RESOURCE_EXHAUSTED (a
// shed request).
func StatusOf(code int, message string, details []any, retryAfter int) Status {
	k := kindOf(code)
	st := Status{Code: k.http, Status: k.status, Message: message, Details: details}
	if retryAfter > 0 {
		st.Code, st.Status = http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"
	}
	for _, d := range details {
		if _, ok := d.(a2av1.ErrorInfo); ok {
			return st
		}
	}
	st.Details = append([]any{a2av1.ErrorInfo{Type: errorInfoType, Reason: k.reason, Domain: a2av1.ErrorDomain}}, details...)
	return st
}

// errorInfoType is the @type of google.rpc.ErrorInfo.
const errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// WriteError writes st as the answer, with st.Code as the HTTP status and,
// for a 429, Retry-After: retryAfter seconds.
func WriteError(w http.ResponseWriter, st Status, retryAfter int) {
	b, err := json.Marshal(ErrorBody{Error: st})
	if err != nil {
		b = []byte(`{"error":{"code":500,"status":"INTERNAL","message":"the error does not encode"}}`)
		st.Code = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if retryAfter > 0 && st.Code == http.StatusTooManyRequests {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(st.Code)
	w.Write(b)
}

// NotFound answers a path no route has: 404 with the error body.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, Status{Code: http.StatusNotFound, Status: "NOT_FOUND", Message: "no route " + r.URL.Path,
		Details: []any{a2av1.ErrorInfo{Type: errorInfoType, Reason: "METHOD_NOT_FOUND", Domain: a2av1.ErrorDomain}}}, 0)
}

// MethodNotAllowed answers a path whose routes take other methods: 405
// with Allow and the error body.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", joinComma(allow))
	WriteError(w, Status{Code: http.StatusMethodNotAllowed, Status: "UNIMPLEMENTED",
		Message: fmt.Sprintf("%s %s: the method is not allowed; use %s", r.Method, r.URL.Path, joinComma(allow)),
		Details: []any{a2av1.ErrorInfo{Type: errorInfoType, Reason: "METHOD_NOT_FOUND", Domain: a2av1.ErrorDomain}}}, 0)
}

func joinComma(s []string) string { return strings.Join(s, ", ") }

// Error is an error answer of the binding, as the client reads it: the
// HTTP status, and the body's status, message and details. It wraps
// a2a-go's sentinel for the A2A error its ErrorInfo names (or, without
// one, for its HTTP status; a2acall's for the errors a2a-go has none for),
// so errors.Is works on it; unless it names an A2A-specific error (a task
// not found, ...), it wraps an *a2acall.HTTPError with its status too, as
// a2acall's clients report an answer that is not the protocol's (a route
// or a content type the agent does not serve).
type Error struct {
	Op         string // the 1.0 operation called
	HTTPStatus int
	Status     string
	Message    string
	Reason     string          // the ErrorInfo's reason, "" without one
	Details    json.RawMessage // the details as sent
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("a2arest: %s: HTTP %d", e.Op, e.HTTPStatus)
	if e.Status != "" {
		s += " " + e.Status
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap returns a2a-go's sentinel error of the answer, if it has one, and
// the *a2acall.HTTPError of its status unless it names an A2A-specific
// error.
func (e *Error) Unwrap() []error {
	var out []error
	if s := e.sentinel(); s != nil {
		out = append(out, s)
	}
	if k, ok := e.kind(); !ok || k.code < -32009 || k.code > -32001 {
		out = append(out, &a2acall.HTTPError{Method: e.Op, Code: e.HTTPStatus, Status: strconv.Itoa(e.HTTPStatus) + " " + http.StatusText(e.HTTPStatus), Body: e.Message})
	}
	return out
}

// kind is the error kind its ErrorInfo's reason names.
func (e *Error) kind() (errorKind, bool) {
	for _, k := range errorKinds {
		if e.Reason != "" && k.reason == e.Reason {
			return k, true
		}
	}
	return errorKind{}, false
}

// sentinel is the answer's sentinel error, by its reason, else by its
// status.
func (e *Error) sentinel() error {
	if k, ok := e.kind(); ok {
		return k.sentinel
	}
	switch {
	case e.HTTPStatus == http.StatusUnsupportedMediaType:
		return a2a.ErrUnsupportedContentType
	case e.HTTPStatus == http.StatusTooManyRequests || e.HTTPStatus == http.StatusServiceUnavailable:
		return a2a.ErrServerError
	case e.HTTPStatus >= 500:
		return a2a.ErrInternalError
	case e.HTTPStatus == http.StatusBadRequest:
		return a2a.ErrInvalidRequest
	}
	return nil
}

// ReadError reads an error body (as sent, at most what the caller read):
// the status, message and the first ErrorInfo's reason in the A2A domain or
// agentd's. A body that is not the error body leaves them empty: the
// HTTP status still says what failed.
func ReadError(op string, httpStatus int, body []byte) *Error {
	e := &Error{Op: op, HTTPStatus: httpStatus}
	var b struct {
		Error struct {
			Status  string          `json:"status"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return e
	}
	e.Status, e.Message, e.Details = b.Error.Status, b.Error.Message, b.Error.Details
	var details []a2av1.ErrorInfo
	if json.Unmarshal(b.Error.Details, &details) == nil {
		for _, d := range details {
			if d.Type == errorInfoType && (d.Domain == a2av1.ErrorDomain || d.Domain == a2av1.ShedDomain) {
				e.Reason = d.Reason
				break
			}
		}
	}
	return e
}
