package server

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
)

// appendTask03 appends t as a2a-go's Task.MarshalJSON writes it (the A2A 0.3
// task, "kind":"task" first), byte for byte, without reflection and without
// the copy and re-scan encoding/json makes of each nested MarshalJSON (the
// task, every message, every part): the answer of every message/send and
// tasks/get. ok is false, and b unspecified, where MarshalJSON would fail (a
// value encoding/json cannot encode, a timestamp outside years 0 to 9999);
// the caller encodes such a task the ordinary way, which reports it.
// Anything it does not know the shape of (a file part, a metadata value
// other than a string, bool, integer, nil, map[string]any or []any) it
// encodes with json.Marshal, as encoding/json would inside the task.
func appendTask03(b []byte, t *a2a.Task) ([]byte, bool) {
	ok := true
	b = append(b, `{"kind":"task","id":`...)
	b = appendJSONString(b, string(t.ID))
	if len(t.Artifacts) > 0 {
		b = append(b, `,"artifacts":[`...)
		for i, a := range t.Artifacts {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendArtifact(b, a)
			if !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"contextId":`...)
	b = appendJSONString(b, t.ContextID)
	if len(t.History) > 0 {
		b = append(b, `,"history":[`...)
		for i, m := range t.History {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendMessage(b, m)
			if !ok {
				return b, false
			}
		}
		b = append(b, ']')
	}
	if len(t.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		if b, ok = appendMap(b, t.Metadata, 0); !ok {
			return b, false
		}
	}
	b = append(b, `,"status":{`...)
	st := t.Status
	if st.Message != nil {
		b = append(b, `"message":`...)
		if b, ok = appendMessage(b, st.Message); !ok {
			return b, false
		}
		b = append(b, ',')
	}
	b = append(b, `"state":`...)
	b = appendJSONString(b, string(st.State))
	if st.Timestamp != nil {
		b = append(b, `,"timestamp":`...)
		if b, ok = appendTime(b, *st.Timestamp); !ok {
			return b, false
		}
	}
	return append(b, "}}"...), true
}

// appendMessage appends m as Message.MarshalJSON writes it; a nil m is null.
func appendMessage(b []byte, m *a2a.Message) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	ok := true
	b = append(b, `{"kind":"message","messageId":`...)
	b = appendJSONString(b, m.ID)
	if m.ContextID != "" {
		b = append(b, `,"contextId":`...)
		b = appendJSONString(b, m.ContextID)
	}
	if len(m.Extensions) > 0 {
		b = append(b, `,"extensions":`...)
		b = appendStrings(b, m.Extensions)
	}
	if len(m.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		if b, ok = appendMap(b, m.Metadata, 0); !ok {
			return b, false
		}
	}
	b = append(b, `,"parts":`...)
	if b, ok = appendParts(b, m.Parts); !ok {
		return b, false
	}
	if len(m.ReferenceTasks) > 0 {
		b = append(b, `,"referenceTaskIds":[`...)
		for i, id := range m.ReferenceTasks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, string(id))
		}
		b = append(b, ']')
	}
	b = append(b, `,"role":`...)
	b = appendJSONString(b, string(m.Role))
	if m.TaskID != "" {
		b = append(b, `,"taskId":`...)
		b = appendJSONString(b, string(m.TaskID))
	}
	return append(b, '}'), true
}

// appendArtifact appends a as encoding/json writes an a2a.Artifact; a nil a
// is null.
func appendArtifact(b []byte, a *a2a.Artifact) ([]byte, bool) {
	if a == nil {
		return append(b, "null"...), true
	}
	ok := true
	b = append(b, `{"artifactId":`...)
	b = appendJSONString(b, string(a.ID))
	if a.Description != "" {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, a.Description)
	}
	if len(a.Extensions) > 0 {
		b = append(b, `,"extensions":`...)
		b = appendStrings(b, a.Extensions)
	}
	if len(a.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		if b, ok = appendMap(b, a.Metadata, 0); !ok {
			return b, false
		}
	}
	if a.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, a.Name)
	}
	b = append(b, `,"parts":`...)
	if b, ok = appendParts(b, a.Parts); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendParts appends parts as encoding/json writes a2a.ContentParts: a
// nil slice is null, a text or data part is written here, any other part
// by json.Marshal.
func appendParts(b []byte, parts a2a.ContentParts) ([]byte, bool) {
	if parts == nil {
		return append(b, "null"...), true
	}
	ok := true
	b = append(b, '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		switch p := p.(type) {
		case a2a.TextPart:
			b, ok = appendTextPart(b, p.Text, p.Metadata)
		case *a2a.TextPart:
			if p == nil {
				b = append(b, "null"...)
				continue
			}
			b, ok = appendTextPart(b, p.Text, p.Metadata)
		case a2a.DataPart:
			b, ok = appendDataPart(b, p.Data, p.Metadata)
		case *a2a.DataPart:
			if p == nil {
				b = append(b, "null"...)
				continue
			}
			b, ok = appendDataPart(b, p.Data, p.Metadata)
		default:
			b, ok = appendMarshal(b, p)
		}
		if !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

func appendTextPart(b []byte, text string, meta map[string]any) ([]byte, bool) {
	b = append(b, `{"kind":"text","text":`...)
	b = appendJSONString(b, text)
	return appendPartMeta(b, meta)
}

func appendDataPart(b []byte, data, meta map[string]any) ([]byte, bool) {
	ok := true
	b = append(b, `{"kind":"data","data":`...)
	if data == nil {
		b = append(b, "null"...)
	} else if b, ok = appendMap(b, data, 0); !ok {
		return b, false
	}
	return appendPartMeta(b, meta)
}

// appendPartMeta appends a part's metadata (omitted when empty) and closes
// the part.
func appendPartMeta(b []byte, meta map[string]any) ([]byte, bool) {
	if len(meta) > 0 {
		var ok bool
		b = append(b, `,"metadata":`...)
		if b, ok = appendMap(b, meta, 0); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendTime appends t as time.Time's MarshalJSON writes it; ok is false
// where that fails.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return b, false
	}
	return append(b, '"'), true
}

// maxTaskJSONDepth is how deep appendAny follows nested maps and slices itself;
// below that, json.Marshal encodes the value (and finds a cycle, which it
// refuses).
const maxTaskJSONDepth = 32

// appendMap appends m with its keys sorted, as encoding/json writes a
// map[string]any; a nil m is null.
func appendMap(b []byte, m map[string]any, depth int) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	if depth >= maxTaskJSONDepth {
		return appendMarshal(b, m)
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ok := true
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		if b, ok = appendAny(b, m[k], depth+1); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendAny appends v as encoding/json writes it inside a map[string]any:
// the common JSON types here, anything else by json.Marshal.
func appendAny(b []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	case uint64:
		return strconv.AppendUint(b, v, 10), true
	case map[string]any:
		return appendMap(b, v, depth)
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxTaskJSONDepth {
			return appendMarshal(b, v)
		}
		ok := true
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendAny(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return appendMarshal(b, v)
}

// appendMarshal appends json.Marshal's encoding of v, which is what
// encoding/json writes for v inside a larger value.
func appendMarshal(b []byte, v any) ([]byte, bool) {
	enc, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, enc...), true
}

const lowerHex = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way json.Marshal writes
// one: the control characters, the quote and the backslash escaped, and so
// are <, > and & (as \u003c, \u003e, \u0026) and U+2028 and U+2029; each
// byte of invalid UTF-8 becomes \ufffd.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', lowerHex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
