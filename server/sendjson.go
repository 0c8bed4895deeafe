package server

import (
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
)

// decodeSendFast decodes the params of an A2A 0.3 message/send or
// message/stream into p when they have the common shape: a message alone
// (no configuration, no metadata), with messageId, role, optionally kind,
// contextId and taskId, and one or more text parts, each of kind and text
// alone, every name spelled exactly and given once, every string without
// an escape. It leaves p as json.Unmarshal would (a2a-go's decoding of the
// parts included), without reflection and without a2a-go's three passes
// over each part. Anything else it declines (false, p untouched), and
// json.Unmarshal decodes it as before. The strict pass (checkJSON) has
// read raw already.
func decodeSendFast(raw []byte, p *a2a.MessageSendParams) bool {
	d := fastDecoder{b: raw}
	var msg *a2a.Message
	ok := d.object(func(name []byte) bool {
		if string(name) != "message" || msg != nil {
			return false
		}
		msg = d.message()
		return msg != nil
	})
	if !ok || msg == nil || !d.end() {
		return false
	}
	*p = a2a.MessageSendParams{Message: msg}
	return true
}

// fastDecoder reads the shape decodeSendFast takes; any byte outside it
// fails the read.
type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// consume skips whitespace and then c, reporting whether c was there.
func (d *fastDecoder) consume(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (d *fastDecoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// str reads a string without escapes or control characters, valid UTF-8,
// and returns it copied (the body's buffer is reused).
func (d *fastDecoder) str() (string, bool) {
	s, ok := d.span()
	return string(s), ok
}

// span reads a string as str does, and returns its bytes in the body.
func (d *fastDecoder) span() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.i
	ascii := true
	for ; d.i < len(d.b); d.i++ {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// object reads an object, calling member for each name, with the reader at
// its value; member reads the value, or returns false to fail the read.
func (d *fastDecoder) object(member func(name []byte) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	for {
		name, ok := d.span()
		if !ok || !d.consume(':') || !member(name) {
			return false
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// message reads the message of the params, or returns nil.
func (d *fastDecoder) message() *a2a.Message {
	var (
		m                                     a2a.Message
		seenKind, seenID, seenRole, seenParts bool
		seenContext, seenTask                 bool
	)
	once := func(seen *bool) bool {
		if *seen {
			return false
		}
		*seen = true
		return true
	}
	ok := d.object(func(name []byte) bool {
		var s string
		var ok bool
		switch string(name) {
		case "kind": // encoding/json ignores it: Message has no such field
			_, ok = d.span()
			return ok && once(&seenKind)
		case "messageId":
			m.ID, ok = d.str()
			return ok && once(&seenID)
		case "role":
			s, ok = d.str()
			m.Role = a2a.MessageRole(s)
			return ok && once(&seenRole)
		case "contextId":
			m.ContextID, ok = d.str()
			return ok && once(&seenContext)
		case "taskId":
			s, ok = d.str()
			m.TaskID = a2a.TaskID(s)
			return ok && once(&seenTask)
		case "parts":
			m.Parts, ok = d.textParts()
			return ok && once(&seenParts)
		}
		return false
	})
	if !ok || !seenParts {
		return nil
	}
	return &m
}

// textParts reads a non-empty array of text parts, each {"kind":"text",
// "text":...} in either order, as a2a-go decodes them (TextPart values).
func (d *fastDecoder) textParts() (a2a.ContentParts, bool) {
	if !d.consume('[') {
		return nil, false
	}
	var parts a2a.ContentParts
	for {
		var text string
		var seenKind, seenText bool
		ok := d.object(func(name []byte) bool {
			switch string(name) {
			case "kind":
				if seenKind {
					return false
				}
				seenKind = true
				k, ok := d.span()
				return ok && string(k) == "text"
			case "text":
				if seenText {
					return false
				}
				seenText = true
				var ok bool
				text, ok = d.str()
				return ok
			}
			return false
		})
		if !ok || !seenKind || !seenText {
			return nil, false
		}
		parts = append(parts, a2a.TextPart{Text: text})
		if d.consume(']') {
			return parts, true
		}
		if !d.consume(',') {
			return nil, false
		}
	}
}
