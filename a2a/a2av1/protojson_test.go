package a2av1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// protoFields lists, for every 1.0 request message agentd decodes, its fields
// as a2a.proto (a2a-tck 410ba92's copy of the 1.0 release candidate) names
// them. The decoder must accept exactly these and their lowerCamel JSON names.
var protoFields = map[reflect.Type][]string{
	reflect.TypeFor[SendMessageRequest]():                     {"tenant", "message", "configuration", "metadata"},
	reflect.TypeFor[Message]():                                {"message_id", "context_id", "task_id", "role", "parts", "metadata", "extensions", "reference_task_ids"},
	reflect.TypeFor[Part]():                                   {"text", "raw", "url", "data", "metadata", "filename", "media_type"},
	reflect.TypeFor[SendMessageConfiguration]():               {"accepted_output_modes", "task_push_notification_config", "history_length", "return_immediately"},
	reflect.TypeFor[TaskPushNotificationConfig]():             {"tenant", "id", "task_id", "url", "token", "authentication"},
	reflect.TypeFor[AuthenticationInfo]():                     {"scheme", "credentials"},
	reflect.TypeFor[GetTaskRequest]():                         {"tenant", "id", "history_length"},
	reflect.TypeFor[ListTasksRequest]():                       {"tenant", "context_id", "status", "page_size", "page_token", "history_length", "status_timestamp_after", "include_artifacts"},
	reflect.TypeFor[CancelTaskRequest]():                      {"tenant", "id", "metadata"},
	reflect.TypeFor[SubscribeToTaskRequest]():                 {"tenant", "id"},
	reflect.TypeFor[GetTaskPushNotificationConfigRequest]():   {"tenant", "task_id", "id"},
	reflect.TypeFor[ListTaskPushNotificationConfigsRequest](): {"tenant", "task_id", "page_size", "page_token"},
	reflect.TypeFor[GetExtendedAgentCardRequest]():            {"tenant"},
}

// lowerCamel is the ProtoJSON JSON name of a proto field name.
func lowerCamel(proto string) string {
	var b strings.Builder
	up := false
	for _, r := range proto {
		switch {
		case r == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestRequestMessagesCarryBothNames(t *testing.T) {
	for typ, want := range protoFields {
		m := messageOf(typ)
		if m == nil {
			t.Errorf("%s is not a request message: every field needs a json and a proto tag", typ.Name())
			continue
		}
		var got []string
		for _, f := range m.fields {
			got = append(got, f.proto)
			if f.json != lowerCamel(f.proto) {
				t.Errorf("%s.%s: JSON name %q, ProtoJSON derives %q", typ.Name(), f.proto, f.json, lowerCamel(f.proto))
			}
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: fields %v, a2a.proto has %v", typ.Name(), got, want)
		}
		if _, ok := reflect.New(typ).Interface().(json.Unmarshaler); !ok {
			t.Errorf("%s does not decode itself", typ.Name())
		}
	}
}

// TestProtoNamesDecodeAsJSONNames: every request, written with proto field
// names throughout, decodes to what the same request with JSON names does.
func TestProtoNamesDecodeAsJSONNames(t *testing.T) {
	for _, tc := range []struct {
		camel, snake string
		into         func() any
	}{
		{
			`{"tenant":"t","message":{"messageId":"m","contextId":"c","taskId":"k","role":"ROLE_USER","parts":[{"text":"hi","mediaType":"text/plain","filename":"f","metadata":{"a_b":1}},{"raw":"AAE="},{"url":"https://x/y"},{"data":{"snake_key":true}}],"metadata":{"x":1},"extensions":["e"],"referenceTaskIds":["r"]},
			  "configuration":{"acceptedOutputModes":["text/plain"],"taskPushNotificationConfig":{"tenant":"t","id":"p","taskId":"k","url":"https://hook","token":"tok","authentication":{"scheme":"Bearer","credentials":"c"}},"historyLength":3,"returnImmediately":true},"metadata":{"y":2}}`,
			`{"tenant":"t","message":{"message_id":"m","context_id":"c","task_id":"k","role":"ROLE_USER","parts":[{"text":"hi","media_type":"text/plain","filename":"f","metadata":{"a_b":1}},{"raw":"AAE="},{"url":"https://x/y"},{"data":{"snake_key":true}}],"metadata":{"x":1},"extensions":["e"],"reference_task_ids":["r"]},
			  "configuration":{"accepted_output_modes":["text/plain"],"task_push_notification_config":{"tenant":"t","id":"p","task_id":"k","url":"https://hook","token":"tok","authentication":{"scheme":"Bearer","credentials":"c"}},"history_length":3,"return_immediately":true},"metadata":{"y":2}}`,
			func() any { return new(SendMessageRequest) },
		},
		{`{"id":"t","historyLength":2}`, `{"id":"t","history_length":2}`, func() any { return new(GetTaskRequest) }},
		{
			`{"contextId":"c","status":"TASK_STATE_WORKING","pageSize":5,"pageToken":"p","historyLength":0,"statusTimestampAfter":"2025-01-01T00:00:00Z","includeArtifacts":true}`,
			`{"context_id":"c","status":"TASK_STATE_WORKING","page_size":5,"page_token":"p","history_length":0,"status_timestamp_after":"2025-01-01T00:00:00Z","include_artifacts":true}`,
			func() any { return new(ListTasksRequest) },
		},
		{`{"id":"t","metadata":{"k":"v"}}`, `{"id":"t","metadata":{"k":"v"}}`, func() any { return new(CancelTaskRequest) }},
		{`{"taskId":"t","url":"https://hook","authentication":{"scheme":"Basic"}}`, `{"task_id":"t","url":"https://hook","authentication":{"scheme":"Basic"}}`, func() any { return new(TaskPushNotificationConfig) }},
		{`{"taskId":"t","id":"c"}`, `{"task_id":"t","id":"c"}`, func() any { return new(GetTaskPushNotificationConfigRequest) }},
		{`{"taskId":"t","pageSize":2,"pageToken":"x"}`, `{"task_id":"t","page_size":2,"page_token":"x"}`, func() any { return new(ListTaskPushNotificationConfigsRequest) }},
	} {
		camel, snake := tc.into(), tc.into()
		if err := json.Unmarshal([]byte(tc.camel), camel); err != nil {
			t.Fatalf("%T with JSON names: %v", camel, err)
		}
		if err := json.Unmarshal([]byte(tc.snake), snake); err != nil {
			t.Fatalf("%T with proto names: %v", snake, err)
		}
		if !reflect.DeepEqual(camel, snake) {
			t.Errorf("%T: proto names decode to %+v, JSON names to %+v", camel, snake, camel)
		}
		if reflect.ValueOf(camel).Elem().IsZero() {
			t.Errorf("%T decoded to its zero value", camel)
		}
	}
	// Keys inside a Struct (metadata) or a Value (data) are the client's:
	// snake_case stays as it is.
	var r SendMessageRequest
	json.Unmarshal([]byte(`{"message":{"messageId":"m","role":1,"parts":[{"data":{"task_id":"x"}}],"metadata":{"history_length":1}}}`), &r)
	if string(r.Message.Parts[0].Data) != `{"task_id":"x"}` || r.Message.Metadata["history_length"] != float64(1) {
		t.Fatalf("keys inside data or metadata were renamed: %s %v", r.Message.Parts[0].Data, r.Message.Metadata)
	}
}

// Unrecognized fields are ignored at every level of a request (A2A 1.0 §5.7),
// a 0.3 part's kind and a name that differs from a field's only in case among
// them: the request decodes as it would without them.
func TestProtoJSONIgnoresUnknownFields(t *testing.T) {
	for _, tc := range []struct {
		name, with, without string
		into                func() any
	}{
		{"top level", `{"id":"t","history":3,"future":{"a":[1,{"b":null}]}}`, `{"id":"t"}`, func() any { return new(GetTaskRequest) }},
		{"0.3 kind in a 1.0 part", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"text","text":"x"}]}}`, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`, func() any { return new(SendMessageRequest) }},
		{"deep down", `{"message":{"messageId":"m"},"configuration":{"taskPushNotificationConfig":{"url":"u","authentication":{"scheme":"s","schemes":["s"]}}}}`, `{"message":{"messageId":"m"},"configuration":{"taskPushNotificationConfig":{"url":"u","authentication":{"scheme":"s"}}}}`, func() any { return new(SendMessageRequest) }},
		{"a spelling a2a.proto does not have", `{"task_Id":"x","TaskId":"y","taskId":"t","id":"c"}`, `{"taskId":"t","id":"c"}`, func() any { return new(GetTaskPushNotificationConfigRequest) }},
		{"in a message", `{"message":{"messageId":"m","tckUnknownField":"x","role":"ROLE_USER","parts":[{"text":"x"}]}}`, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`, func() any { return new(SendMessageRequest) }},
	} {
		with, without := tc.into(), tc.into()
		if err := json.Unmarshal([]byte(tc.with), with); err != nil {
			t.Errorf("%s: %s: %v", tc.name, tc.with, err)
			continue
		}
		if err := json.Unmarshal([]byte(tc.without), without); err != nil {
			t.Fatalf("%s: %s: %v", tc.name, tc.without, err)
		}
		if !reflect.DeepEqual(with, without) {
			t.Errorf("%s: %+v, want %+v", tc.name, with, without)
		}
	}
}

func TestProtoJSONRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		into       func() any
		path, says string
	}{
		{"a known field of the wrong type beside an unknown one", `{"id":5,"history":3}`, func() any { return new(GetTaskRequest) }, "id", "want a string, got a number"},
		{"unknown field, then a known one given twice", `{"x":1,"id":"a","id":"a"}`, func() any { return new(GetTaskRequest) }, "id", "given twice"},
		{"both names, different values", `{"taskId":"a","task_id":"b","id":"c"}`, func() any { return new(GetTaskPushNotificationConfigRequest) }, "taskId", `given twice, as "taskId" and "task_id"`},
		{"both names, the same value", `{"task_id":"a","taskId":"a","id":"c"}`, func() any { return new(GetTaskPushNotificationConfigRequest) }, "taskId", `given twice, as "task_id" and "taskId"`},
		{"one name twice", `{"id":"a","id":"a"}`, func() any { return new(GetTaskRequest) }, "id", "given twice"},
		{"both names nested", `{"message":{"messageId":"m","message_id":"m"}}`, func() any { return new(SendMessageRequest) }, "message.messageId", "given twice"},
		{"a string field given a number", `{"taskId":5,"id":"c"}`, func() any { return new(GetTaskPushNotificationConfigRequest) }, "taskId", "want a string, got a number"},
		{"a bool field given a string", `{"includeArtifacts":"true"}`, func() any { return new(ListTasksRequest) }, "includeArtifacts", "want true or false, got a string"},
		{"a Struct given an array", `{"id":"t","metadata":[1]}`, func() any { return new(CancelTaskRequest) }, "metadata", "want an object, got an array"},
		{"a message given a string", `{"message":"hi"}`, func() any { return new(SendMessageRequest) }, "message", "want an object, got a string"},
		{"a repeated field given an object", `{"message":{"parts":{"text":"x"}}}`, func() any { return new(SendMessageRequest) }, "message.parts", "want an array, got an object"},
		{"a null element", `{"message":{"parts":[{"text":"x"},null]}}`, func() any { return new(SendMessageRequest) }, "message.parts[1]", "null is not an element"},
		{"a string list given a number", `{"message":{"extensions":["a",2]}}`, func() any { return new(SendMessageRequest) }, "message.extensions[1]", "want a string, got a number"},
		{"an int32 with a fraction", `{"id":"t","historyLength":1.5}`, func() any { return new(GetTaskRequest) }, "historyLength", "want an int32"},
		{"an int32 past its range", `{"pageSize":2147483648}`, func() any { return new(ListTasksRequest) }, "pageSize", "want an int32"},
		{"an int32 as hex", `{"pageSize":"0x10"}`, func() any { return new(ListTasksRequest) }, "pageSize", "want an int32"},
		{"an int32 string with spaces", `{"pageSize":" 5"}`, func() any { return new(ListTasksRequest) }, "pageSize", "want an int32"},
		{"an int32 as Infinity", `{"pageSize":"Infinity"}`, func() any { return new(ListTasksRequest) }, "pageSize", "want an int32"},
		{"an int32 given a bool", `{"pageSize":true}`, func() any { return new(ListTasksRequest) }, "pageSize", "want an int32, got a boolean"},
		{"an unknown enum name", `{"status":"working"}`, func() any { return new(ListTasksRequest) }, "status", "unknown value"},
		{"not an object", `["id"]`, func() any { return new(GetTaskRequest) }, "", "want an object, got an array"},
	} {
		v := tc.into()
		err := json.Unmarshal([]byte(tc.body), v)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %s: %v, want a *FieldError matching ErrInvalid", tc.name, tc.body, err)
			continue
		}
		if fe.Path != tc.path || !strings.Contains(fe.Reason, tc.says) {
			t.Errorf("%s: %s: path %q, reason %q; want %q, %q", tc.name, tc.body, fe.Path, fe.Reason, tc.path, tc.says)
		}
		if !reflect.ValueOf(v).Elem().IsZero() {
			t.Errorf("%s: a refused request left %+v behind", tc.name, v)
		}
	}
	// Trailing data, which json.Unmarshal catches before the decoder does.
	var r GetTaskRequest
	if err := r.UnmarshalJSON([]byte(`{"id":"a"} {"id":"b"}`)); !errors.Is(err, ErrInvalid) || r.ID != "" {
		t.Fatalf("trailing data: %v, %+v", err, r)
	}
}

// TestRefusedRequestChangesNothing: a request decoded into a value that holds
// something keeps it when the decoding fails.
func TestRefusedRequestChangesNothing(t *testing.T) {
	n := 4
	r := GetTaskRequest{ID: "before", HistoryLength: &n}
	if err := json.Unmarshal([]byte(`{"id":"after","history_length":1,"bogus":1,"tenant":5}`), &r); err == nil {
		t.Fatal("a string field given a number was accepted")
	}
	if r.ID != "before" || r.HistoryLength != &n || n != 4 {
		t.Fatalf("the refused request changed the value: %+v", r)
	}
}

func TestProtoJSONScalars(t *testing.T) {
	for body, want := range map[string]int{
		`3`: 3, `"3"`: 3, `3.0`: 3, `1e2`: 100, `"1e2"`: 100, `-0`: 0, `"-5"`: -5, `2147483647`: 2147483647, `-2147483648`: -2147483648,
	} {
		var r GetTaskRequest
		if err := json.Unmarshal([]byte(`{"id":"t","historyLength":`+body+`}`), &r); err != nil || r.HistoryLength == nil || *r.HistoryLength != want {
			t.Errorf("historyLength %s: %v %v, want %d", body, r.HistoryLength, err, want)
		}
	}
	// null is the field's default value.
	var r SendMessageRequest
	if err := json.Unmarshal([]byte(`{"tenant":null,"message":{"messageId":"m","role":null,"parts":null,"metadata":null},"configuration":null,"metadata":null}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Message == nil || r.Message.MessageID != "m" || r.Message.Role != "" || r.Message.Parts != nil || r.Configuration != nil {
		t.Fatalf("nulls: %+v %+v", r, r.Message)
	}
}

// TestFieldErrorText: the text a client reads names the field.
func TestFieldErrorText(t *testing.T) {
	var r GetTaskPushNotificationConfigRequest
	err := json.Unmarshal([]byte(`{"taskId":"a","task_id":"b"}`), &r)
	if err == nil || err.Error() != `taskId: given twice, as "taskId" and "task_id"` {
		t.Fatalf("%v", err)
	}
	var s SendMessageRequest
	json.Unmarshal([]byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{}]}}`), &s)
	if _, err := SendParamsTo(&s); err == nil || err.Error() != "message.parts[0]: a part holds exactly one of text, raw, url or data (got 0)" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("conversion error: %v", err)
	}
}

// requestKinds are the request messages FuzzDecodeRequest decodes, by the
// first byte of its input.
var requestKinds = []func() any{
	func() any { return new(SendMessageRequest) },
	func() any { return new(GetTaskRequest) },
	func() any { return new(ListTasksRequest) },
	func() any { return new(CancelTaskRequest) },
	func() any { return new(SubscribeToTaskRequest) },
	func() any { return new(TaskPushNotificationConfig) },
	func() any { return new(GetTaskPushNotificationConfigRequest) },
	func() any { return new(ListTaskPushNotificationConfigsRequest) },
	func() any { return new(GetExtendedAgentCardRequest) },
}

// withProtoNames re-encodes a decoded request with proto field names
// throughout (null, the default, for a field at its zero value), as a
// proto-name client would write it.
func withProtoNames(v reflect.Value) any {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		if messageOf(v.Type().Elem()) == nil {
			return v.Interface() // a field with presence: set, even to ""
		}
		v = v.Elem()
	}
	if m := messageOf(v.Type()); m != nil {
		out := map[string]any{}
		for _, f := range m.fields {
			out[f.proto] = withProtoNames(v.Field(f.index))
		}
		return out
	}
	if v.Kind() == reflect.Slice && messageOf(v.Type().Elem()) != nil {
		if v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = withProtoNames(v.Index(i))
		}
		return out
	}
	if v.IsZero() {
		return nil
	}
	return v.Interface()
}

// FuzzDecodeRequest decodes arbitrary params as one of the 1.0 request
// messages (requestKinds, by the first argument); its seed corpus is
// testdata/fuzz/FuzzDecodeRequest. A refusal is a *FieldError and leaves nothing behind; an accepted
// request re-encodes to JSON that decodes to the same request, and so does
// the same request written with proto field names.
func FuzzDecodeRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		into := requestKinds[int(kind)%len(requestKinds)]
		v := into()
		err := json.Unmarshal(body, v)
		if err != nil {
			var fe *FieldError
			var syn *json.SyntaxError
			if !errors.As(err, &syn) && (!errors.As(err, &fe) || !errors.Is(err, ErrInvalid)) {
				t.Fatalf("%s: refused with %T %v, want a *FieldError", body, err, err)
			}
			if !reflect.ValueOf(v).Elem().IsZero() {
				t.Fatalf("%s: refused, but left %+v", body, v)
			}
			return
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: accepted, does not encode: %v", body, err)
		}
		again := into()
		if err := json.Unmarshal(out, again); err != nil {
			t.Fatalf("%s: re-encoded as %s, which is refused: %v", body, out, err)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("%s: encodes as %s, then as %s", body, out, out2)
		}
		snake, err := json.Marshal(withProtoNames(reflect.ValueOf(v)))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		bySnake := into()
		if err := json.Unmarshal(snake, bySnake); err != nil {
			t.Fatalf("%s: with proto names, %s, refused: %v", body, snake, err)
		}
		if out3, _ := json.Marshal(bySnake); !bytes.Equal(out, out3) {
			t.Fatalf("%s: with proto names decodes to %s, with JSON names to %s", body, out3, out)
		}
	})
}

func ExampleFieldError() {
	var r GetTaskPushNotificationConfigRequest
	err := json.Unmarshal([]byte(`{"task_id":"t1","id":"c1","taskId":"t2"}`), &r)
	fmt.Println(err)
	// Output: taskId: given twice, as "task_id" and "taskId"
}

// BenchmarkDecodeSendMessageRequest is the strict ProtoJSON decoding of a
// typical SendMessage params object (a text part, a configuration, metadata).
func BenchmarkDecodeSendMessageRequest(b *testing.B) {
	body := []byte(`{"message":{"messageId":"m-1","contextId":"c-1","role":"ROLE_USER","parts":[{"text":"summarize the open pull requests and post a digest"}],"metadata":{"agentd/skill":"digest"}},"configuration":{"acceptedOutputModes":["text/plain"],"historyLength":5,"returnImmediately":true}}`)
	b.ReportAllocs()
	for b.Loop() {
		var r SendMessageRequest
		if err := json.Unmarshal(body, &r); err != nil || r.Message == nil {
			b.Fatal(err)
		}
	}
}

// TestProtoJSONScanning: keys with escapes, space between tokens, strings
// holding brackets and quotes, and non-ASCII text decode as encoding/json
// reads them.
func TestProtoJSONScanning(t *testing.T) {
	var g GetTaskRequest
	if err := json.Unmarshal([]byte(`{"i\u0064":"t\"1","history\u005flength":"2"}`), &g); err != nil || g.ID != `t"1` || g.HistoryLength == nil || *g.HistoryLength != 2 {
		t.Fatalf("escaped keys: %+v %v", g, err)
	}
	var r SendMessageRequest
	body := " {\"message\" : {\"messageId\":\"m\u00e9\",\"role\":\"ROLE_USER\",\"parts\":[ {\"text\":\"caf\\u00e9 \\\"x\\\" \xff\"} , {\"data\":[1,{\"a\":\"]}\"}]} ]} } "
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	var want struct {
		Message struct {
			MessageID string `json:"messageId"`
			Parts     []struct {
				Text string          `json:"text"`
				Data json.RawMessage `json:"data"`
			} `json:"parts"`
		} `json:"message"`
	}
	json.Unmarshal([]byte(body), &want)
	if r.Message.MessageID != want.Message.MessageID || *r.Message.Parts[0].Text != want.Message.Parts[0].Text || string(r.Message.Parts[1].Data) != string(want.Message.Parts[1].Data) {
		t.Fatalf("decoded %q %q %s, encoding/json reads %q %q %s", r.Message.MessageID, *r.Message.Parts[0].Text, r.Message.Parts[1].Data,
			want.Message.MessageID, want.Message.Parts[0].Text, want.Message.Parts[1].Data)
	}
}
