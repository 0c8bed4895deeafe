package a2av1

// The strict ProtoJSON decoding of the 1.0 request messages.
//
// ProtoJSON (protobuf.dev/programming-guides/json) names a field by its
// lowerCamelCase JSON name on output, and a parser accepts that name or the
// original proto field name (task_id as well as taskId). agentd's request
// types carry both: the JSON name in the `json` tag, the proto name in the
// `proto` tag. A parser rejects unknown fields by default; agentd does, at
// every level of a request (inside a google.protobuf.Struct or Value, such as
// metadata or a data part, any key goes). A field given twice, by the same
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
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
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

func fieldErr(path, format string, args ...any) error {
	return &FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

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
// an error *v is unchanged.
func decodeRequest[T any](data []byte, v *T) error {
	var fresh T
	if err := decodeMessage(data, reflect.ValueOf(&fresh).Elem(), ""); err != nil {
		return err
	}
	*v = fresh
	return nil
}

func isNull(raw []byte) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeMessage decodes the JSON object data into rv, a struct messageOf
// knows, at path.
func decodeMessage(data []byte, rv reflect.Value, path string) error {
	m := messageOf(rv.Type())
	if m == nil {
		panic(fmt.Sprintf("a2av1: %s is not a request message (every field needs a json and a proto tag)", rv.Type()))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return fieldErr(path, "not valid JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fieldErr(path, "want an object, got %s", kindOf(data))
	}
	seen := make([]string, len(m.fields)) // the name each field was given by
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fieldErr(path, "not valid JSON: %v", err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fieldErr(path, "not valid JSON: %v", err)
		}
		i, ok := m.byName[key]
		if !ok {
			return fieldErr(path, "unknown field %q", key)
		}
		f := m.fields[i]
		fpath := join(path, f.json)
		if prev := seen[i]; prev != "" {
			if prev == key {
				return fieldErr(fpath, "given twice")
			}
			return fieldErr(fpath, "given twice, as %q and %q", prev, key)
		}
		seen[i] = key
		if err := decodeField(raw, rv.Field(f.index), fpath); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fieldErr(path, "not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fieldErr(path, "data after the object")
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decodeField decodes one field's value. null leaves the field at its default.
func decodeField(raw []byte, fv reflect.Value, path string) error {
	if isNull(raw) {
		fv.Set(reflect.Zero(fv.Type()))
		return nil
	}
	t := fv.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		elem := reflect.New(t.Elem())
		if err := decodeField(raw, elem.Elem(), path); err != nil {
			return err
		}
		fv.Set(elem)
		return nil
	case messageOf(t) != nil:
		// Before the Unmarshaler case: the request messages decode
		// themselves too, but here they are decoded in place, at their path.
		return decodeMessage(raw, fv, path)
	case reflect.PointerTo(t).Implements(unmarshalerType):
		return decodeScalar(raw, fv, path)
	case t.Kind() == reflect.Slice:
		return decodeList(raw, fv, path)
	case t.Kind() == reflect.Int:
		n, err := decodeInt32(raw)
		if err != nil {
			return fieldErr(path, "%v", err)
		}
		fv.SetInt(int64(n))
		return nil
	}
	return decodeScalar(raw, fv, path)
}

// decodeList decodes a repeated field: an array whose elements are not null.
func decodeList(raw []byte, fv reflect.Value, path string) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return fieldErr(path, "want an array, got %s", kindOf(raw))
	}
	out := reflect.MakeSlice(fv.Type(), len(elems), len(elems))
	for i, e := range elems {
		epath := fmt.Sprintf("%s[%d]", path, i)
		if isNull(e) {
			return fieldErr(epath, "null is not an element")
		}
		if err := decodeField(e, out.Index(i), epath); err != nil {
			return err
		}
	}
	fv.Set(out)
	return nil
}

// decodeScalar decodes a value that is not a message: a string, a bool, a
// map (google.protobuf.Struct), raw JSON (google.protobuf.Value), an enum or
// bytes (which decode themselves).
func decodeScalar(raw []byte, fv reflect.Value, path string) error {
	if err := json.Unmarshal(raw, fv.Addr().Interface()); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fieldErr(path, "want %s, got %s", want(fv.Type()), kindOf(raw))
		}
		return fieldErr(path, "%v", err)
	}
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
	s := string(bytes.TrimSpace(raw))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("want an int32, got %s", raw)
		}
		if !isJSONNumber(s) {
			return 0, fmt.Errorf("want an int32, got %q", s)
		}
	} else if !isJSONNumber(s) {
		return 0, fmt.Errorf("want an int32, got %s", kindOf(raw))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("want an int32, got %s", s)
	}
	return int32(f), nil
}

// isJSONNumber reports whether s is exactly one JSON number literal (no
// space, no sign but a leading minus, no hex, no Inf or NaN).
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	last := s[len(s)-1]
	if last < '0' || last > '9' {
		return false
	}
	var v json.Number
	return json.Unmarshal([]byte(s), &v) == nil
}

// UnmarshalJSON decodes the params of SendMessage and SendStreamingMessage as
// ProtoJSON: JSON or proto field names, unknown or repeated fields refused
// with a *FieldError. The same holds for every request message below.
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
