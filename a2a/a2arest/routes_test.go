package a2arest

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2av1"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		op           string
		params       []PathParam
		err          error
	}{
		{"POST", "/message:send", a2av1.MethodSendMessage, nil, nil},
		{"POST", "/message:stream", a2av1.MethodSendStreamingMessage, nil, nil},
		{"GET", "/tasks", a2av1.MethodListTasks, nil, nil},
		{"GET", "/tasks/t1", a2av1.MethodGetTask, []PathParam{{"id", "t1"}}, nil},
		{"GET", "/tasks/a%2Fb%3Ac", a2av1.MethodGetTask, []PathParam{{"id", "a/b:c"}}, nil},
		{"POST", "/tasks/t1:cancel", a2av1.MethodCancelTask, []PathParam{{"id", "t1"}}, nil},
		{"GET", "/tasks/t1:subscribe", a2av1.MethodSubscribeToTask, []PathParam{{"id", "t1"}}, nil},
		{"POST", "/tasks/t1:subscribe", a2av1.MethodSubscribeToTask, []PathParam{{"id", "t1"}}, nil},
		{"POST", "/tasks/t1/pushNotificationConfigs", a2av1.MethodCreatePushConfig, []PathParam{{"taskId", "t1"}}, nil},
		{"GET", "/tasks/t1/pushNotificationConfigs", a2av1.MethodListPushConfigs, []PathParam{{"taskId", "t1"}}, nil},
		{"GET", "/tasks/t1/pushNotificationConfigs/c1", a2av1.MethodGetPushConfig, []PathParam{{"taskId", "t1"}, {"id", "c1"}}, nil},
		{"DELETE", "/tasks/t1/pushNotificationConfigs/c1", a2av1.MethodDeletePushConfig, []PathParam{{"taskId", "t1"}, {"id", "c1"}}, nil},
		{"GET", "/extendedAgentCard", a2av1.MethodGetExtendedAgentCard, nil, nil},
		{"GET", "/tasks/", "", nil, ErrNoRoute},
		{"GET", "/tasks//pushNotificationConfigs", "", nil, ErrNoRoute},
		{"POST", "/tasks/t1:pause", "", nil, ErrNoRoute},
		{"GET", "/tasks/t1/other", "", nil, ErrNoRoute},
		{"GET", "/", "", nil, ErrNoRoute},
		{"GET", "/message:send", "", nil, ErrMethod},
		{"PUT", "/tasks/t1", "", nil, ErrMethod},
		{"DELETE", "/tasks/t1:subscribe", "", nil, ErrMethod},
	} {
		rt, params, allow, err := Match(tc.method, tc.path)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s %s: err %v, want %v", tc.method, tc.path, err, tc.err)
			continue
		}
		if err != nil {
			if tc.err == ErrMethod && len(allow) == 0 {
				t.Errorf("%s %s: no Allow", tc.method, tc.path)
			}
			continue
		}
		if rt.Op != tc.op || len(params) != len(tc.params) {
			t.Errorf("%s %s: %s %v, want %s %v", tc.method, tc.path, rt.Op, params, tc.op, tc.params)
			continue
		}
		for i := range params {
			if params[i] != tc.params[i] {
				t.Errorf("%s %s: param %v, want %v", tc.method, tc.path, params[i], tc.params[i])
			}
		}
	}
}

// Every route's Path matches the route back, for ids that need escaping.
func TestPathRoundTrip(t *testing.T) {
	for i := range Routes {
		rt := &Routes[i]
		vals := map[string]string{"id": "a/b:c d?", "taskId": "t:1"}
		p, err := rt.Path(vals)
		if err != nil {
			t.Fatal(err)
		}
		got, params, _, err := Match(rt.Method, p)
		if err != nil || got.Op != rt.Op {
			t.Fatalf("%s %s: Path %q matches %v %v", rt.Method, rt.Pattern, p, got, err)
		}
		for _, pp := range params {
			if pp.Value != vals[pp.Name] {
				t.Errorf("%s: %s = %q, want %q", p, pp.Name, pp.Value, vals[pp.Name])
			}
		}
	}
	if _, err := RouteOf(a2av1.MethodGetTask).Path(nil); err == nil {
		t.Fatal("Path without the id: no error")
	}
}

func TestParams(t *testing.T) {
	get := RouteOf(a2av1.MethodGetTask)
	list := RouteOf(a2av1.MethodListTasks)
	cancel := RouteOf(a2av1.MethodCancelTask)
	send := RouteOf(a2av1.MethodSendMessage)
	for _, tc := range []struct {
		name  string
		rt    *Route
		path  []PathParam
		query string
		body  string
		want  string // the object, compared as JSON; "" for an error
	}{
		{"path only", get, []PathParam{{"id", "t1"}}, "", "", `{"id":"t1"}`},
		{"path and query", get, []PathParam{{"id", "t1"}}, "historyLength=3&other=x", "", `{"id":"t1","historyLength":3}`},
		{"list query", list, nil, "contextId=c&status=input-required&pageSize=2&includeArtifacts=true&statusTimestampAfter=2026-01-01T00:00:00Z", "", `{"contextId":"c","status":"TASK_STATE_INPUT_REQUIRED","pageSize":2,"includeArtifacts":true,"statusTimestampAfter":"2026-01-01T00:00:00Z"}`},
		{"enum name", list, nil, "status=TASK_STATE_WORKING", "", `{"status":"TASK_STATE_WORKING"}`},
		{"empty list", list, nil, "", "", `{}`},
		{"cancel without body", cancel, []PathParam{{"id", "t1"}}, "", "", `{"id":"t1"}`},
		{"cancel with body", cancel, []PathParam{{"id", "t1"}}, "", `{"metadata":{"k":1}}`, `{"id":"t1","metadata":{"k":1}}`},
		{"cancel with empty body object", cancel, []PathParam{{"id", "t1"}}, "", ` { } `, `{"id":"t1"}`},
		{"cancel, body names the same id", cancel, []PathParam{{"id", "t1"}}, "", `{"id":"t1"}`, `{"id":"t1"}`},
		{"cancel, body names another id", cancel, []PathParam{{"id", "t1"}}, "", `{"id":"t2"}`, ""},
		{"send", send, nil, "", `{"message":{}}`, `{"message":{}}`},
		{"send without body", send, nil, "", "", ""},
		{"send, array body", send, nil, "", `[]`, ""},
		{"send, broken body", send, nil, "", `{"a":`, ""},
		{"body on a GET", get, []PathParam{{"id", "t1"}}, "", `{}`, ""},
		{"bad int", get, []PathParam{{"id", "t1"}}, "historyLength=1.5", "", ""},
		{"int out of range", get, []PathParam{{"id", "t1"}}, "historyLength=99999999999", "", ""},
		{"bad bool", list, nil, "includeArtifacts=yes", "", ""},
		{"repeated", list, nil, "pageSize=1&pageSize=1", "", ""},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := Params(tc.rt, tc.path, q, []byte(tc.body))
		if tc.want == "" {
			if !errors.Is(err, ErrRequest) {
				t.Errorf("%s: %s, %v; want ErrRequest", tc.name, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(tc.want), &b) != nil || !jsonEqual(a, b) {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The error mapping of section 5.4, and the client's reading of it back to
// a2a-go's sentinels.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		code, status int
		name         string
	}{
		{-32001, 404, "NOT_FOUND"}, {-32002, 409, "FAILED_PRECONDITION"}, {-32003, 400, "UNIMPLEMENTED"},
		{-32004, 400, "UNIMPLEMENTED"}, {-32005, 415, "INVALID_ARGUMENT"}, {-32006, 502, "INTERNAL"},
		{-32007, 400, "FAILED_PRECONDITION"}, {-32008, 400, "FAILED_PRECONDITION"}, {-32009, 400, "UNIMPLEMENTED"},
		{-32602, 400, "INVALID_ARGUMENT"}, {-32603, 500, "INTERNAL"}, {-32000, 503, "UNAVAILABLE"}, {-1, 500, "INTERNAL"},
	} {
		st := StatusOf(tc.code, "m", nil, 0)
		if st.Code != tc.status || st.Status != tc.name || HTTPStatus(tc.code) != tc.status {
			t.Errorf("code %d: %d %s, want %d %s", tc.code, st.Code, st.Status, tc.status, tc.name)
		}
		b, _ := json.Marshal(ErrorBody{Error: st})
		e := ReadError("Op", st.Code, b)
		k := kindOf(tc.code)
		if k.sentinel != nil && !errors.Is(e, k.sentinel) {
			t.Errorf("code %d: client error %v does not wrap %v", tc.code, e, k.sentinel)
		}
	}
	if st := StatusOf(-32000, "busy", a2av1.ResourceExhausted("d", "queue_full", 3), 3); st.Code != 429 || st.Status != "RESOURCE_EXHAUSTED" || len(st.Details) != 2 {
		t.Errorf("shed: %+v", st)
	}
	if e := ReadError("Op", http.StatusBadGateway, []byte("<html>")); e.Reason != "" || !strings.Contains(e.Error(), "502") {
		t.Errorf("non-JSON error body: %v", e)
	}
	// An answer that is not an A2A error (a route the agent does not
	// serve) is an *a2acall.HTTPError too, as a2acall reports it; an A2A
	// error of the same status is not.
	var h *a2acall.HTTPError
	if e := ReadError("Op", 404, []byte("404 page not found")); !errors.As(e, &h) || h.Code != 404 {
		t.Errorf("a plain 404: %v does not wrap an HTTPError", e)
	}
	b, _ := json.Marshal(ErrorBody{Error: StatusOf(-32001, "gone", nil, 0)})
	if e := ReadError("Op", 404, b); errors.As(e, &h) || !errors.Is(e, a2a.ErrTaskNotFound) {
		t.Errorf("task not found: %v", e)
	}
	b, _ = json.Marshal(ErrorBody{Error: StatusOf(-32009, "no", nil, 0)})
	if e := ReadError("Op", 400, b); !errors.Is(e, a2acall.ErrVersionNotSupported) {
		t.Errorf("version not supported: %v", e)
	}
}
