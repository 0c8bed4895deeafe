package a2av1

// The strict ProtoJSON decoding of the 1.0 request messages.
//
// ProtoJSON (protobuf.dev/programming-guides/json) names a field by its
// lowerCamelCase JSON name on output, and a parser accepts that name or the
// original proto field name (task_id as well as taskId). agentd's request
// types carry both: the JSON name in the `json` tag, the proto name in the
// `proto` tag. An unrecognized field is ignored, at every level of a request,
// as A2A 1.0 §5.7 asks for forward compatibility (ProtoJSON parsers refuse
// one by default; this one does not): its value must still be JSON, and the
// whole request within the server's size and depth limits, but it sets
// nothing, so a name that differs from a field's only in case is no way to
// set it. Inside a google.protobuf.Struct or Value (metadata, a data part)
// every key is kept as sent. A field given twice, by the same
// name or by both, is refused even when both values agree: protobuf's
// conformance suite wants parsers to refuse both (its FieldNameDuplicate and
// FieldNameDuplicateDifferentCasing tests), so such a request is not
// portable, and which value was meant is not agentd's guess. null is the
// field's default value, as ProtoJSON says; an int32 field takes a number or
// a string holding one, integral and in range.
//
// Every refusal is a *FieldError naming the field by its path in JSON names
// from the params object ("message.parts[0].mediaType"); it matches
// ErrInvalid, which the server answers with InvalidParams (-32602).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/jsonscan"
)

// FieldError is a request the 1.0 decoding refused. Path names the field in
// JSON names from the params object, such as "message.parts[0].mediaType" (""
// is the params object itself); Reason says what is wrong with it.
// errors.Is(err, ErrInvalid) holds for every FieldError.
type FieldError struct {
	Path   string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// protoField is one field of a request message: its Go field index and its
// two ProtoJSON names.
type protoField struct {
	index       int
	json, proto string
}

// protoMessage is what the decoder knows of one request message type.
type protoMessage struct {
	fields []protoField
	byName map[string]int // JSON or proto name -> index into fields
}

var protoMessages sync.Map // reflect.Type -> *protoMessage

// messageOf returns the fields of t, a struct whose fields all carry both a
// json and a proto tag; nil when t is not such a struct (a scalar, a map, a
// type that decodes itself).
func messageOf(t reflect.Type) *protoMessage {
	if t.Kind() != reflect.Struct {
		return nil
	}
	if m, ok := protoMessages.Load(t); ok {
		return m.(*protoMessage)
	}
	m := &protoMessage{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		proto := f.Tag.Get("proto")
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if proto == "" || name == "" || name == "-" {
			m = nil
			break
		}
		m.byName[name] = len(m.fields)
		m.byName[proto] = len(m.fields)
		m.fields = append(m.fields, protoField{index: i, json: name, proto: proto})
	}
	if m != nil && len(m.fields) == 0 {
		m = nil
	}
	protoMessages.Store(t, m) // nil too: not a message
	return m
}

// decodeRequest decodes data into *v, a request message, all or nothing: on
// an error *v is unchanged. null changes nothing, by encoding/json's
// convention for Unmarshalers.
func decodeRequest[T any](data []byte, v *T) error {
	if isNull(bytes.TrimSpace(data)) {
		return nil // as json.Unmarshal treats null: no change
	}
	if !json.Valid(data) {
		return fieldErr(at{index: -1}, "not valid JSON")
	}
	var fresh T
	if err := decodeMessage(data, reflect.ValueOf(&fresh).Elem(), at{index: -1}); err != nil {
		return err
	}
	*v = fresh
	return nil
}

// at is where a value sits in the params object, for error messages: a field
// (name) of the value at parent, or element index of the list at parent. The
// path string is built only when it is needed.
type at struct {
	parent string
	name   string // the field's JSON name; "" for a list element or the params object
	index  int    // the list element's index; -1 otherwise
}

func (a at) String() string {
	switch {
	case a.index >= 0:
		return a.parent + "[" + strconv.Itoa(a.index) + "]"
	case a.name == "":
		return a.parent
	case a.parent == "":
		return a.name
	}
	return a.parent + "." + a.name
}

func fieldErr(where at, format string, args ...any) error {
	return &FieldError{Path: where.String(), Reason: fmt.Sprintf(format, args...)}
}

// The scanning below (jsonscan) reads JSON that json.Valid accepted
// (decodeRequest checks the whole request once), so it only finds where
// values end.

// unquote is the text of the JSON string raw; it copies, so nothing decoded
// keeps a reference into the request.
func unquote(raw []byte) (string, error) {
	if end, esc := jsonscan.StringEnd(raw, 0); !esc && end == len(raw) {
		plain := true
		for _, c := range raw {
			if c >= 0x80 {
				plain = false // json.Unmarshal's handling of invalid UTF-8
				break
			}
		}
		if plain {
			return string(raw[1 : len(raw)-1]), nil
		}
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// decodeMessage decodes the JSON object data into rv, a struct messageOf
// knows.
func decodeMessage(data []byte, rv reflect.Value, where at) error {
	m := messageOf(rv.Type())
	if m == nil {
		panic(fmt.Sprintf("a2av1: %s is not a request message (every field needs a json and a proto tag)", rv.Type()))
	}
	i := jsonscan.SkipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return fieldErr(where, "want an object, got %s", kindOf(data))
	}
	path := "" // where's path, once a nested value needs it
	var seenBuf [16][]byte
	var seen [][]byte
	if len(m.fields) <= len(seenBuf) {
		seen = seenBuf[:len(m.fields)]
	} else {
		seen = make([][]byte, len(m.fields))
	}
	i = jsonscan.SkipSpace(data, i+1)
	for i < len(data) && data[i] != '}' {
		kend, esc := jsonscan.StringEnd(data, i)
		rawKey := data[i:kend]
		key := rawKey[1 : len(rawKey)-1]
		if esc {
			k, err := unquote(rawKey)
			if err != nil {
				return fieldErr(where, "bad key %s", rawKey)
			}
			key = []byte(k)
		}
		i = jsonscan.SkipSpace(data, kend)
		i = jsonscan.SkipSpace(data, i+1) // past ':'
		vend := jsonscan.ValueEnd(data, i)
		value := data[i:vend]
		i = jsonscan.SkipSpace(data, vend)
		if i < len(data) && data[i] == ',' {
			i = jsonscan.SkipSpace(data, i+1)
		}
		n, ok := m.byName[string(key)]
		if !ok {
			continue // an unrecognized field: ignored (A2A 1.0 §5.7)
		}
		f := m.fields[n]
		if path == "" {
			path = where.String()
		}
		fat := at{parent: path, name: f.json, index: -1}
		if prev := seen[n]; prev != nil {
			if string(prev) == string(key) {
				return fieldErr(fat, "given twice")
			}
			return fieldErr(fat, "given twice, as %q and %q", prev, key)
		}
		seen[n] = key
		if err := decodeField(value, rv.Field(f.index), fat); err != nil {
			return err
		}
	}
	if i = jsonscan.SkipSpace(data, i+1); i != len(data) {
		return fieldErr(where, "data after the object")
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decodeField decodes one field's value. null leaves the field at its default.
func decodeField(raw []byte, fv reflect.Value, where at) error {
	if isNull(raw) {
		fv.Set(reflect.Zero(fv.Type()))
		return nil
	}
	t := fv.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		elem := reflect.New(t.Elem())
		if err := decodeField(raw, elem.Elem(), where); err != nil {
			return err
		}
		fv.Set(elem)
		return nil
	case messageOf(t) != nil:
		// Before the Unmarshaler case: the request messages decode
		// themselves too, but here they are decoded in place, at their path.
		return decodeMessage(raw, fv, where)
	case reflect.PointerTo(t).Implements(unmarshalerType):
		// An enum, bytes or a google.protobuf.Value: raw is valid JSON
		// already, so the method is called without json.Unmarshal's scan.
		if err := fv.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			return fieldErr(where, "%v", err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		if raw[0] != '"' {
			return fieldErr(where, "want a string, got %s", kindOf(raw))
		}
		s, err := unquote(raw)
		if err != nil {
			return fieldErr(where, "%v", err)
		}
		fv.SetString(s)
		return nil
	case reflect.Bool:
		switch string(raw) {
		case "true":
			fv.SetBool(true)
		case "false":
			fv.SetBool(false)
		default:
			return fieldErr(where, "want true or false, got %s", kindOf(raw))
		}
		return nil
	case reflect.Int:
		n, err := decodeInt32(raw)
		if err != nil {
			return fieldErr(where, "%v", err)
		}
		fv.SetInt(int64(n))
		return nil
	case reflect.Slice:
		return decodeList(raw, fv, where)
	}
	// A google.protobuf.Struct (map[string]any).
	if err := json.Unmarshal(raw, fv.Addr().Interface()); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fieldErr(where, "want %s, got %s", want(t), kindOf(raw))
		}
		return fieldErr(where, "%v", err)
	}
	return nil
}

// elements calls fn for each element of the JSON array raw.
func elements(raw []byte, fn func(i int, elem []byte) error) error {
	i := jsonscan.SkipSpace(raw, 1)
	for n := 0; i < len(raw) && raw[i] != ']'; n++ {
		end := jsonscan.ValueEnd(raw, i)
		if err := fn(n, raw[i:end]); err != nil {
			return err
		}
		i = jsonscan.SkipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = jsonscan.SkipSpace(raw, i+1)
		}
	}
	return nil
}

// decodeList decodes a repeated field: an array whose elements are not null.
func decodeList(raw []byte, fv reflect.Value, where at) error {
	if raw[0] != '[' {
		return fieldErr(where, "want an array, got %s", kindOf(raw))
	}
	count := 0
	elements(raw, func(int, []byte) error { count++; return nil })
	out := reflect.MakeSlice(fv.Type(), count, count)
	path := where.String()
	err := elements(raw, func(i int, elem []byte) error {
		eat := at{parent: path, index: i}
		if isNull(elem) {
			return fieldErr(eat, "null is not an element")
		}
		return decodeField(elem, out.Index(i), eat)
	})
	if err != nil {
		return err
	}
	fv.Set(out)
	return nil
}

// want names the JSON a Go field type takes.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

// kindOf names the kind of a JSON value, for error messages.
func kindOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// decodeInt32 reads a ProtoJSON int32: a JSON number, or a string holding
// one, that is integral (1e2 and 5.0 are) and within int32.
func decodeInt32(raw []byte) (int32, error) {
	s := string(raw)
	if raw[0] == '"' {
		u, err := unquote(raw)
		if err != nil || !isJSONNumber(u) {
			return 0, fmt.Errorf("want an int32, got %s", raw)
		}
		s = u
	} else if !isJSONNumber(s) {
		return 0, fmt.Errorf("want an int32, got %s", kindOf(raw))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("want an int32, got %s", s)
	}
	return int32(f), nil
}

// isJSONNumber reports whether s is exactly one JSON number literal:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? (no space, no plus sign, no
// hex, no Inf or NaN).
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// UnmarshalJSON decodes the params of SendMessage and SendStreamingMessage as
// ProtoJSON: JSON or proto field names, unrecognized fields ignored, a
// field given twice or a value of the wrong type refused with a *FieldError.
// The same holds for every request message below.
func (r *SendMessageRequest) UnmarshalJSON(b []byte) error { return decodeRequest(b, r) }

// UnmarshalJSON decodes the message as ProtoJSON (see SendMessageRequest).
func (m *Message) UnmarshalJSON(b []byte) error { return decodeRequest(b, m) }

// UnmarshalJSON decodes the part as ProtoJSON (see SendMessageRequest).
func (p *Part) UnmarshalJSON(b []byte) error { return decodeRequest(b, p) }

// UnmarshalJSON decodes the configuration as ProtoJSON (see
// SendMessageRequest).
func (c *SendMessageConfiguration) UnmarshalJSON(b []byte) error { return decodeRequest(b, c) }

// UnmarshalJSON decodes the config, the params of
// CreateTaskPushNotificationConfig, as ProtoJSON (see SendMessageRequest).
func (c *TaskPushNotificationConfig) UnmarshalJSON(b []byte) error { return decodeRequest(b, c) }

// UnmarshalJSON decodes the authentication as ProtoJSON (see
// SendMessageRequest).
func (a *AuthenticationInfo) UnmarshalJSON(b []byte) error { return decodeRequest(b, a) }

// UnmarshalJSON decodes the params of GetTask as ProtoJSON (see
// SendMessageRequest).
func (r *GetTaskRequest) UnmarshalJSON(b []byte) error { return decodeRequest(b, r) }

// UnmarshalJSON decodes the params of ListTasks as ProtoJSON (see
// SendMessageRequest).
func (r *ListTasksRequest) UnmarshalJSON(b []byte) error { return decodeRequest(b, r) }

// UnmarshalJSON decodes the params of CancelTask as ProtoJSON (see
// SendMessageRequest).
func (r *CancelTaskRequest) UnmarshalJSON(b []byte) error { return decodeRequest(b, r) }

// UnmarshalJSON decodes the params of SubscribeToTask as ProtoJSON (see
// SendMessageRequest).
func (r *SubscribeToTaskRequest) UnmarshalJSON(b []byte) error { return decodeRequest(b, r) }

// UnmarshalJSON decodes the params of GetTaskPushNotificationConfig and
// DeleteTaskPushNotificationConfig as ProtoJSON (see SendMessageRequest).
func (r *GetTaskPushNotificationConfigRequest) UnmarshalJSON(b []byte) error {
	return decodeRequest(b, r)
}

// UnmarshalJSON decodes the params of ListTaskPushNotificationConfigs as
// ProtoJSON (see SendMessageRequest).
func (r *ListTaskPushNotificationConfigsRequest) UnmarshalJSON(b []byte) error {
	return decodeRequest(b, r)
}

// UnmarshalJSON decodes the params of GetExtendedAgentCard as ProtoJSON (see
// SendMessageRequest).
func (r *GetExtendedAgentCardRequest) UnmarshalJSON(b []byte) error { return decodeRequest(b, r) }
