package a2arest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/a2a/a2av1"
)

// Route is one operation of the binding: an HTTP method and path pattern
// and the A2A 1.0 operation (its JSON-RPC method name) it carries.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Pattern is the path: literal segments, and {name} for a path
	// parameter, which sets the request field of that JSON name; a last
	// segment may end in a :verb ("/tasks/{id}:cancel").
	Pattern string
	// Op is the 1.0 operation (a2av1.MethodGetTask, ...).
	Op string
	// Stream marks a route answered with a server-sent event stream.
	Stream bool
	// Body marks a route that takes the request as a JSON body; Optional
	// marks one whose body may be absent (an empty request).
	Body, Optional bool
	// Query are the query parameters the route reads, by JSON field name,
	// and how each is written in the request object.
	Query map[string]QueryKind
}

// QueryKind is how a query parameter's value is written in the request
// object.
type QueryKind int

// Kinds of query parameters.
const (
	QueryString QueryKind = iota // a JSON string
	QueryInt                     // a JSON number: a decimal integer
	QueryBool                    // true or false
	QueryState                   // a TaskState: its enum name, or the short form (working, input-required)
)

// Routes is the route table of A2A 1.0's HTTP+JSON binding (the
// specification's section 11.3, with the methods of a2a.proto's
// google.api.http annotations). SubscribeToTask is served over both GET
// (the .proto) and POST (section 11.3.2's text; what the JavaScript SDK
// sends); the client uses the first route of an operation.
var Routes = []Route{
	{Method: http.MethodPost, Pattern: "/message:send", Op: a2av1.MethodSendMessage, Body: true},
	{Method: http.MethodPost, Pattern: "/message:stream", Op: a2av1.MethodSendStreamingMessage, Body: true, Stream: true},
	{Method: http.MethodGet, Pattern: "/tasks/{id}", Op: a2av1.MethodGetTask, Query: map[string]QueryKind{"historyLength": QueryInt}},
	{Method: http.MethodGet, Pattern: "/tasks", Op: a2av1.MethodListTasks, Query: map[string]QueryKind{
		"contextId": QueryString, "status": QueryState, "pageSize": QueryInt, "pageToken": QueryString,
		"historyLength": QueryInt, "statusTimestampAfter": QueryString, "includeArtifacts": QueryBool,
	}},
	{Method: http.MethodPost, Pattern: "/tasks/{id}:cancel", Op: a2av1.MethodCancelTask, Body: true, Optional: true},
	{Method: http.MethodGet, Pattern: "/tasks/{id}:subscribe", Op: a2av1.MethodSubscribeToTask, Stream: true},
	{Method: http.MethodPost, Pattern: "/tasks/{id}:subscribe", Op: a2av1.MethodSubscribeToTask, Stream: true, Body: true, Optional: true},
	{Method: http.MethodPost, Pattern: "/tasks/{taskId}/pushNotificationConfigs", Op: a2av1.MethodCreatePushConfig, Body: true},
	{Method: http.MethodGet, Pattern: "/tasks/{taskId}/pushNotificationConfigs/{id}", Op: a2av1.MethodGetPushConfig},
	{Method: http.MethodGet, Pattern: "/tasks/{taskId}/pushNotificationConfigs", Op: a2av1.MethodListPushConfigs, Query: map[string]QueryKind{"pageSize": QueryInt, "pageToken": QueryString}},
	{Method: http.MethodDelete, Pattern: "/tasks/{taskId}/pushNotificationConfigs/{id}", Op: a2av1.MethodDeletePushConfig},
	{Method: http.MethodGet, Pattern: "/extendedAgentCard", Op: a2av1.MethodGetExtendedAgentCard},
}

// Prefixes are the paths under which the routes live, for a router that
// mounts the binding: each route's path is one of these or starts with one
// followed by "/".
var Prefixes = []string{"/message:send", "/message:stream", "/tasks", "/extendedAgentCard"}

// ErrNoRoute and ErrMethod are Match's refusals: no route has the path
// (404), or routes have it but not with the request's method (405).
var (
	ErrNoRoute = errors.New("a2arest: no such route")
	ErrMethod  = errors.New("a2arest: method not allowed")
)

// PathParam is one path parameter: the JSON name of the request field it
// sets, and its value (unescaped).
type PathParam struct {
	Name, Value string
}

// segments splits a pattern or an escaped path into its segments after the
// leading slash, and the last segment's :verb.
func segments(p string) (segs []string, verb string, ok bool) {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") && p != "/" {
		return nil, "", false
	}
	segs = strings.Split(p[1:], "/")
	last := segs[len(segs)-1]
	if i := strings.LastIndexByte(last, ':'); i >= 0 {
		segs[len(segs)-1], verb = last[:i], last[i+1:]
	}
	return segs, verb, true
}

// match reports whether the escaped path matches route's pattern, and its
// path parameters.
func (rt *Route) match(escapedPath string) ([]PathParam, bool) {
	want, wantVerb, _ := segments(rt.Pattern)
	got, verb, ok := segments(escapedPath)
	if !ok || len(got) != len(want) || verb != wantVerb {
		return nil, false
	}
	var params []PathParam
	for i, w := range want {
		if strings.HasPrefix(w, "{") {
			v, err := url.PathUnescape(got[i])
			if err != nil || v == "" {
				return nil, false
			}
			params = append(params, PathParam{Name: w[1 : len(w)-1], Value: v})
			continue
		}
		if got[i] != w {
			return nil, false
		}
	}
	return params, true
}

// Match finds the route of a request by its method and escaped path
// (url.URL.EscapedPath): the route and its path parameters, else ErrNoRoute,
// or ErrMethod with the methods the path allows.
func Match(method, escapedPath string) (*Route, []PathParam, []string, error) {
	var allow []string
	for i := range Routes {
		rt := &Routes[i]
		params, ok := rt.match(escapedPath)
		if !ok {
			continue
		}
		if rt.Method == method {
			return rt, params, nil, nil
		}
		allow = append(allow, rt.Method)
	}
	if len(allow) > 0 {
		return nil, nil, allow, ErrMethod
	}
	return nil, nil, nil, ErrNoRoute
}

// ErrRequest marks a request whose path, query or body does not make a
// request object; the server answers it with InvalidArgument (400).
var ErrRequest = errors.New("a2arest: invalid request")

func requestErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRequest, fmt.Sprintf(format, args...))
}

// Params builds the route's 1.0 request object, the params its JSON-RPC
// method would carry, from the path parameters, the query and the body
// (nil or empty when there is none). A body must be a JSON object; a path
// parameter is added to it, and a body that gives the same field another
// value is refused. Query parameters the route does not read are ignored
// (the specification's section 5.7: unknown fields are ignored); one given
// twice, or of the wrong kind, is refused. Params checks only what it
// writes: the request object is decoded and checked where the JSON-RPC
// binding decodes its params.
func Params(rt *Route, path []PathParam, query url.Values, body []byte) (json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	fields := make([]string, 0, len(path)+len(rt.Query))
	var given map[string]json.RawMessage
	if len(body) > 0 {
		if !rt.Body {
			return nil, requestErr("%s %s takes no body", rt.Method, rt.Pattern)
		}
		if body[0] != '{' {
			return nil, requestErr("the body must be a JSON object")
		}
		if err := json.Unmarshal(body, &given); err != nil {
			return nil, requestErr("the body is not a JSON object: %v", err)
		}
	} else if rt.Body && !rt.Optional {
		return nil, requestErr("%s %s needs a JSON body", rt.Method, rt.Pattern)
	}
	for _, p := range path {
		if !utf8.ValidString(p.Value) {
			return nil, requestErr("path parameter %s is not UTF-8", p.Name)
		}
		v, _ := json.Marshal(p.Value)
		if raw, ok := given[p.Name]; ok {
			var s string
			if json.Unmarshal(raw, &s) != nil || s != p.Value {
				return nil, requestErr("the body's %s %s is not the path's %q", p.Name, raw, p.Value)
			}
			continue
		}
		name, _ := json.Marshal(p.Name)
		fields = append(fields, string(name)+":"+string(v))
	}
	for name, kind := range rt.Query {
		vals, ok := query[name]
		if !ok {
			continue
		}
		if len(vals) != 1 {
			return nil, requestErr("query parameter %s given %d times", name, len(vals))
		}
		if !utf8.ValidString(vals[0]) {
			return nil, requestErr("query parameter %s is not UTF-8", name)
		}
		v, err := queryValue(kind, vals[0])
		if err != nil {
			return nil, requestErr("query parameter %s: %v", name, err)
		}
		n, _ := json.Marshal(name)
		fields = append(fields, string(n)+":"+string(v))
	}
	if len(fields) == 0 {
		if len(body) == 0 {
			return json.RawMessage("{}"), nil
		}
		return json.RawMessage(body), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	b.WriteString(strings.Join(fields, ","))
	if len(body) > 0 {
		if rest := bytes.TrimSpace(body[1:]); len(rest) > 0 && rest[0] != '}' {
			b.WriteByte(',')
		}
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

// queryValue writes one query parameter's value as JSON.
func queryValue(kind QueryKind, v string) ([]byte, error) {
	switch kind {
	case QueryInt:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a 32-bit decimal integer", v)
		}
		return strconv.AppendInt(nil, n, 10), nil
	case QueryBool:
		switch v {
		case "true", "false":
			return []byte(v), nil
		}
		return nil, fmt.Errorf("%q is not true or false", v)
	case QueryState:
		s := strings.ToUpper(strings.ReplaceAll(v, "-", "_"))
		if !strings.HasPrefix(s, "TASK_STATE_") {
			s = "TASK_STATE_" + s
		}
		return json.Marshal(s)
	}
	return json.Marshal(v)
}

// Path returns the escaped path of the route for these path parameters,
// by name (the client's side of Match).
func (rt *Route) Path(params map[string]string) (string, error) {
	segs, verb, _ := segments(rt.Pattern)
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			v := params[s[1:len(s)-1]]
			if v == "" {
				return "", fmt.Errorf("a2arest: %s %s: %s is required", rt.Method, rt.Pattern, s)
			}
			// A ':' would read as the start of a verb.
			segs[i] = strings.ReplaceAll(url.PathEscape(v), ":", "%3A")
		}
	}
	p := "/" + strings.Join(segs, "/")
	if verb != "" {
		p += ":" + verb
	}
	return p, nil
}

// RouteOf returns the first route of the operation op.
func RouteOf(op string) *Route {
	for i := range Routes {
		if Routes[i].Op == op {
			return &Routes[i]
		}
	}
	return nil
}
