package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/agentd/agentd/api"
)

// A child keeps every byte it allocates while it waits on its model (it does
// not collect then, figure 9), so a large string that comes in a control
// frame is decoded into the frame's own body rather than copied out of it:
// the body, which the frame reader allocated for that frame alone, becomes
// the string's memory, where it was garbage beside a copy (the spawn
// frame's 64 KiB objective: 74 KB of body and 74 KB of objective; a 16 KiB
// tool result: its body, the decoder's unquoted bytes and the string).
//
// liftString does it for one string literal of a JSON text: it unquotes
// the literal in place and moves it behind the text, which is left with ""
// where the literal was, so that encoding/json decodes the rest without
// allocating the string; the caller then sets the field to the lifted
// string. The buffer must be the caller's alone and must never be written
// again once lifted: the string shares its memory.

// liftMin is the smallest JSON text whose largest string is lifted: below
// it, the copy costs little and the locating pass would be most of the work.
const liftMin = 8 << 10

// span is a JSON value as it is in the decoder's input: a slice of it, not
// a copy (json.RawMessage copies).
type span []byte

// UnmarshalJSON keeps b, a slice of the input.
func (s *span) UnmarshalJSON(b []byte) error {
	*s = b
	return nil
}

// liftString takes the JSON string literal lit, a slice of buf, out of
// buf: it returns the JSON text without it (buf's first bytes, "" where the
// literal was) and the literal's value, which shares buf's memory (after
// the text). ok is false, and buf unchanged, when lit is not a string
// literal sliced from buf or holds invalid UTF-8 (which encoding/json
// replaces, growing the string).
func liftString(buf, lit []byte) (rest []byte, s string, ok bool) {
	at := cap(buf) - cap(lit)
	if len(lit) < 2 || at < 0 || at+len(lit) > len(buf) || &buf[at] != &lit[0] || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, "", false
	}
	content := lit[1 : len(lit)-1]
	if !utf8.Valid(content) {
		return nil, "", false
	}
	n := unquoteInPlace(content)
	// buf is A "content" B: rotating what follows the opening quote by
	// len(content) makes it A ""B content, in place.
	r, k := buf[at+1:], len(content)
	slices.Reverse(r[:k])
	slices.Reverse(r[k:])
	slices.Reverse(r)
	tail := buf[len(buf)-k:]
	return buf[:len(buf)-k], unsafe.String(unsafe.SliceData(tail), n), true
}

// unquoteInPlace decodes the body of a valid JSON string literal (between
// its quotes, valid UTF-8) into its own first bytes, as encoding/json
// decodes it, and returns its length. Every escape is at least as long as
// what it decodes to, so the writes never overtake the reads.
func unquoteInPlace(b []byte) int {
	r := bytes.IndexByte(b, '\\')
	if r < 0 {
		return len(b)
	}
	w := r
	for r < len(b) {
		c := b[r]
		if c != '\\' {
			b[w] = c
			w++
			r++
			continue
		}
		switch e := b[r+1]; e {
		case 'b':
			b[w] = '\b'
		case 'f':
			b[w] = '\f'
		case 'n':
			b[w] = '\n'
		case 'r':
			b[w] = '\r'
		case 't':
			b[w] = '\t'
		case 'u':
			rr := hex4(b[r+2:])
			r += 6
			if utf16.IsSurrogate(rr) {
				rr1 := rune(-1)
				if r+6 <= len(b) && b[r] == '\\' && b[r+1] == 'u' {
					rr1 = hex4(b[r+2:])
				}
				if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
					r += 6
					w += utf8.EncodeRune(b[w:], dec)
					continue
				}
				rr = unicode.ReplacementChar
			}
			w += utf8.EncodeRune(b[w:], rr)
			continue
		default: // '"', '\\', '/'
			b[w] = e
		}
		w++
		r += 2
	}
	return w
}

// hex4 decodes the four hex digits that start b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// decodeSpawnParams decodes the spawn frame's params into p, as
// api.DecodeParams does (through decodeSpawn's wire types), with a large
// objective (at least half the params, figure 9's 64 KiB) lifted into the
// params' memory: params must be the frame body's, which nothing else
// reads or writes.
func decodeSpawnParams(params []byte, p *api.SpawnPayload) error {
	if len(params) >= liftMin {
		var at struct {
			Contract struct {
				Objective span `json:"objective"`
			} `json:"contract"`
		}
		if json.Unmarshal(params, &at) == nil && len(at.Contract.Objective) >= len(params)/2 {
			if rest, obj, ok := liftString(params, at.Contract.Objective); ok {
				if err := decodeSpawn(rest, p); err != nil {
					return fmt.Errorf("%s params: %w", api.MethodSpawn, err)
				}
				p.Contract.Objective = obj
				return nil
			}
		}
	}
	if err := decodeSpawn(params, p); err != nil {
		return fmt.Errorf("%s params: %w", api.MethodSpawn, err)
	}
	return nil
}

// errorMark is what toolText puts before an error result's text.
const errorMark = "ERROR: "

// decodeToolResult decodes a tool/call result into r, as json.Unmarshal
// does, with the text of a large one-block result (at least half the
// result, figure 9's 16 KiB) lifted into the result's memory: result must
// be the frame body's, which nothing else reads or writes. text is then
// the result as the model is shown it (toolText), made in the same memory
// (an error's mark written before the text), else "". A 16 KiB result cost
// its frame's body, the decoder's unquoted bytes, its string and toolText's
// copy of it; now its body.
func decodeToolResult(result []byte, r *api.ToolResult) (text string, err error) {
	if len(result) >= liftMin {
		var at struct {
			Content []struct {
				Text span `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(result, &at) == nil && len(at.Content) == 1 && len(at.Content[0].Text) >= len(result)/2 {
			if rest, s, ok := liftString(result, at.Content[0].Text); ok {
				if err := json.Unmarshal(rest, r); err != nil {
					return "", err
				}
				if len(r.Content) != 1 { // the block the text was lifted from
					return "", fmt.Errorf("the result's text block is gone after its text was lifted")
				}
				r.Content[0].Text = s
				switch {
				case len(r.StructuredContent) > 0 && s == "", r.IsError && len(rest) < len(errorMark):
					return "", nil // toolText makes it
				case !r.IsError:
					return s, nil
				}
				// rest is spent: the mark goes just before the text.
				at := len(rest)
				copy(result[at-len(errorMark):at], errorMark)
				return unsafe.String(&result[at-len(errorMark)], len(errorMark)+len(s)), nil
			}
		}
	}
	return "", json.Unmarshal(result, r)
}
