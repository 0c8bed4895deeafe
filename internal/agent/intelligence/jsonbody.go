package intelligence

import (
	"encoding/json"
	"errors"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonBody is a request's JSON body kept as what it is written from: its
// small parts (names, ids, the tools) encoded, and its large strings (the
// conversation's turns) by reference, escaped only as the body is read onto
// the connection. A model call thus never holds an encoded copy of its
// conversation, nor makes one: figure 9's 64 KiB conversation was a request of
// about 170 KiB, encoded in a buffer that grew by doubling (about 700 KiB
// allocated a call, the heap's growth that brought on a collection). The
// bytes read are those json.Marshal writes for the same value (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD), and the
// body's length is known before it is read (Content-Length).
type jsonBody struct {
	skel []byte    // the encoded small parts, in order
	segs []bodySeg // the body: each segment's skel bytes, then its string or JSON
	size int64
}

// bodySeg is skel[from:to], then str or bstr escaped (without its quotes,
// which are in skel), or raw as it is (JSON already, such as a model's
// encoded tools).
type bodySeg struct {
	from, to int
	str      string
	bstr     []byte // a string held in bytes: a tool call's arguments
	raw      []byte
}

// bigString is the length from which a string is written by reference rather
// than encoded into skel.
const bigString = 512

// raw appends s, JSON already, to the body.
func (b *jsonBody) raw(s string) { b.skel = append(b.skel, s...) }

// str appends s as a JSON string.
func (b *jsonBody) str(s string) {
	if len(s) < bigString {
		b.skel = appendEscaped(b.skel, s)
		return
	}
	b.skel = append(b.skel, '"')
	b.cut(s)
	b.skel = append(b.skel, '"')
}

// bytes appends s as a JSON string, as str does; a large s is written by
// reference, and must not change until the body has been read for the
// last time.
func (b *jsonBody) bytes(s []byte) {
	if len(s) < bigString {
		b.skel = appendEscaped(b.skel, s)
		return
	}
	b.skel = append(b.skel, '"')
	b.cut("")
	b.segs[len(b.segs)-1].bstr = s
	b.skel = append(b.skel, '"')
}

// json appends v, valid JSON (nil is null), as encoding/json writes a
// json.RawMessage: compact, with HTML characters escaped. A large v that is
// so already is written by reference, and must not change until the body
// has been read for the last time; the rest goes into skel.
func (b *jsonBody) json(v []byte) {
	if v == nil {
		b.raw("null")
		return
	}
	if len(v) >= bigString && compactAsIs(v) {
		b.ref(v)
		return
	}
	b.skel = appendCompact(b.skel, v)
}

// jsonOut takes a JSON value's parts in order: jsonBytes appends them,
// jsonLen counts their bytes.
type jsonOut interface {
	raw(s string)  // JSON already
	str(s string)  // a JSON string, escaped as json.Marshal does
	json(v []byte) // valid JSON (or nil: null), compact and escaped as json.Marshal writes a json.RawMessage
}

// encodeJSON is the value write writes, in a slice of its length: write
// runs twice, to count and to append.
func encodeJSON(write func(jsonOut)) []byte {
	var n jsonLen
	write(&n)
	b := jsonBytes(make([]byte, 0, int(n)))
	write(&b)
	return b
}

// jsonBytes appends a JSON value's parts.
type jsonBytes []byte

func (b *jsonBytes) raw(s string) { *b = append(*b, s...) }
func (b *jsonBytes) str(s string) { *b = appendEscaped(*b, s) }
func (b *jsonBytes) json(v []byte) {
	if v == nil {
		*b = append(*b, "null"...)
		return
	}
	*b = appendCompact(*b, v)
}

// jsonLen counts a JSON value's bytes.
type jsonLen int

func (n *jsonLen) raw(s string) { *n += jsonLen(len(s)) }
func (n *jsonLen) str(s string) { *n += jsonLen(escapedLen(s) + 2) }
func (n *jsonLen) json(v []byte) {
	if v == nil {
		*n += 4
		return
	}
	*n += jsonLen(compactLen(v))
}

// checkJSON says whether v is valid JSON (nil is null).
func checkJSON(v []byte) error {
	if v != nil && !json.Valid(v) {
		return errors.New("not valid JSON")
	}
	return nil
}

// ref appends v, JSON written as it is, by reference.
func (b *jsonBody) ref(v []byte) {
	b.cut("")
	b.segs[len(b.segs)-1].raw = v
}

// cut ends the current segment with s.
func (b *jsonBody) cut(s string) {
	from := 0
	if n := len(b.segs); n > 0 {
		from = b.segs[n-1].to
	}
	b.segs = append(b.segs, bodySeg{from: from, to: len(b.skel), str: s})
}

// done closes the body and counts its bytes.
func (b *jsonBody) done() *jsonBody {
	b.cut("")
	b.size = int64(len(b.skel))
	for _, s := range b.segs {
		b.size += int64(escapedLen(s.str) + escapedLen(s.bstr) + len(s.raw))
	}
	return b
}

// open returns a reader of the whole body, and its length.
func (b *jsonBody) open() (io.ReadCloser, int64, error) {
	return &bodyReader{b: b}, b.size, nil
}

// bodyReader reads a jsonBody from the start.
type bodyReader struct {
	b       *jsonBody
	seg     int  // the segment being read
	inStr   bool // past its skel bytes, in its string
	off     int  // in the skel bytes or the string
	pending []byte
	buf     [8]byte // an escape, or a rune, that did not fit
	read    int64   // bytes read so far
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.pending) > 0 {
			c := copy(p[n:], r.pending)
			r.pending, n = r.pending[c:], n+c
			continue
		}
		if r.seg >= len(r.b.segs) {
			break
		}
		s := &r.b.segs[r.seg]
		if !r.inStr {
			c := copy(p[n:], r.b.skel[s.from+r.off:s.to])
			n, r.off = n+c, r.off+c
			if s.from+r.off == s.to {
				r.inStr, r.off = true, 0
			}
			continue
		}
		if s.raw != nil {
			if r.off < len(s.raw) {
				c := copy(p[n:], s.raw[r.off:])
				n, r.off = n+c, r.off+c
				continue
			}
			r.seg, r.inStr, r.off = r.seg+1, false, 0
			continue
		}
		var done bool
		if s.bstr != nil {
			n, done = escapeInto(r, p, n, s.bstr)
		} else {
			n, done = escapeInto(r, p, n, s.str)
		}
		if done {
			r.seg, r.inStr, r.off = r.seg+1, false, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	r.read += int64(n)
	return n, nil
}

// WriteTo writes the rest of the body to w. net/http, once it has copied
// a body of known length onto the connection (bodyConn), copies what is
// left of it (nothing) to io.Discard, which reads through an 8 KiB buffer
// of its own unless the body writes itself: that buffer is not made. The
// rest, if there is any, goes through a buffer made for it.
func (r *bodyReader) WriteTo(w io.Writer) (int64, error) {
	if r.read == r.b.size {
		return 0, nil
	}
	return copyThrough(w, r, make([]byte, bodyConnBuf))
}

// Close lets go of the body.
func (r *bodyReader) Close() error { return nil }

// escapeInto writes s from r.off, escaped, into p from n (or what does
// not fit into r.pending), and returns the new n; done says s was all
// written.
func escapeInto[T string | []byte](r *bodyReader, p []byte, n int, s T) (_ int, done bool) {
	if r.off == len(s) {
		return n, true
	}
	safe, esc, adv := nextEscaped(s, r.off, len(p)-n, &r.buf)
	if safe > 0 {
		c := copy(p[n:], s[r.off:r.off+safe])
		r.off += c
		return n + c, false
	}
	r.pending, r.off = esc, r.off+adv
	return n, false
}

// nextEscaped says how s from i is written in a JSON string: either a run of
// at most limit safe bytes, written as they are (safe > 0), or one
// character's escape or bytes (esc, held in buf) standing for s[i:i+adv]. It
// escapes what json.Marshal does (escapeHTML on).
func nextEscaped[T string | []byte](s T, i, limit int, buf *[8]byte) (safe int, esc []byte, adv int) {
	run := s[i:min(len(s), i+max(limit, 1))]
	j := 0
	for j < len(run) && htmlSafe[run[j]] {
		j++
	}
	if j > 0 {
		return j, nil, 0
	}
	const hex = "0123456789abcdef"
	if c := s[i]; c < utf8.RuneSelf {
		switch c {
		case '\\', '"':
			buf[0], buf[1] = '\\', c
		case '\b':
			buf[0], buf[1] = '\\', 'b'
		case '\f':
			buf[0], buf[1] = '\\', 'f'
		case '\n':
			buf[0], buf[1] = '\\', 'n'
		case '\r':
			buf[0], buf[1] = '\\', 'r'
		case '\t':
			buf[0], buf[1] = '\\', 't'
		default:
			buf[0], buf[1], buf[2], buf[3], buf[4], buf[5] = '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF]
			return 0, buf[:6], 1
		}
		return 0, buf[:2], 1
	}
	var r [utf8.UTFMax]byte
	c, size := utf8.DecodeRune(r[:copy(r[:], s[i:])])
	switch {
	case c == utf8.RuneError && size == 1:
		return 0, append(buf[:0], `\ufffd`...), 1
	case c == '\u2028' || c == '\u2029':
		return 0, append(buf[:0], '\\', 'u', '2', '0', '2', hex[c&0xF]), size
	}
	return 0, buf[:copy(buf[:], s[i:i+size])], size
}

// htmlSafe says whether a byte is written as it is in a JSON string by
// json.Marshal without more ado: an ASCII byte it does not escape (a byte
// of a longer UTF-8 sequence is looked at with its rune).
var htmlSafe = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendEscaped appends s to dst as a JSON string, quoted.
func appendEscaped[T string | []byte](dst []byte, s T) []byte {
	var buf [8]byte
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		safe, esc, adv := nextEscaped(s, i, len(s), &buf)
		if safe > 0 {
			dst, i = append(dst, s[i:i+safe]...), i+safe
			continue
		}
		dst, i = append(dst, esc...), i+adv
	}
	return append(dst, '"')
}

// escapedLen is the length of s escaped, without quotes.
func escapedLen[T string | []byte](s T) int {
	var buf [8]byte
	n := 0
	for i := 0; i < len(s); {
		safe, esc, adv := nextEscaped(s, i, len(s), &buf)
		if safe > 0 {
			n, i = n+safe, i+safe
			continue
		}
		n, i = n+len(esc), i+adv
	}
	return n
}

// appendCompact appends src, valid JSON, to dst as encoding/json writes a
// json.RawMessage holding it: without the spaces between tokens, with <, >,
// & and U+2028, U+2029 escaped.
func appendCompact(dst, src []byte) []byte {
	const hex = "0123456789abcdef"
	var sc compactScan
	start := 0
	for i := 0; i < len(src); {
		k, skip, esc := sc.step(src, i)
		switch {
		case skip:
			dst = append(dst, src[start:i]...)
		case esc && k == 1:
			dst = append(append(dst, src[start:i]...), '\\', 'u', '0', '0', hex[src[i]>>4], hex[src[i]&0xF])
		case esc:
			dst = append(append(dst, src[start:i]...), '\\', 'u', '2', '0', '2', hex[src[i+2]&0xF])
		default:
			i += k
			continue
		}
		i += k
		start = i
	}
	return append(dst, src[start:]...)
}

// compactLen is the length of src as appendCompact writes it.
func compactLen(src []byte) int {
	var sc compactScan
	n := 0
	for i := 0; i < len(src); {
		k, skip, esc := sc.step(src, i)
		switch {
		case skip:
		case esc:
			n += 6
		default:
			n += k
		}
		i += k
	}
	return n
}

// compactAsIs says whether appendCompact writes src as it is.
func compactAsIs(src []byte) bool {
	var sc compactScan
	for i := 0; i < len(src); {
		k, skip, esc := sc.step(src, i)
		if skip || esc {
			return false
		}
		i += k
	}
	return true
}

// compactScan walks valid JSON from its start, byte by byte, knowing
// whether it is in a string.
type compactScan struct{ inStr, backslash bool }

// step reads src[i]: k bytes stand for one character (3 for U+2028 and
// U+2029, 1 otherwise); skip says it is a space between tokens, which a
// compact encoding leaves out; esc that the character is written as an
// escape (<, >, &, U+2028, U+2029, as encoding/json does).
func (s *compactScan) step(src []byte, i int) (k int, skip, esc bool) {
	c := src[i]
	switch {
	case s.inStr && s.backslash:
		s.backslash = false
	case s.inStr && c == '\\':
		s.backslash = true
	case c == '"':
		s.inStr = !s.inStr
	case !s.inStr && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
		return 1, true, false
	}
	if c == '<' || c == '>' || c == '&' {
		return 1, false, true
	}
	if c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8 {
		return 3, false, true
	}
	return 1, false, false
}

// unquoteNext reads s, the contents of a JSON string (without its quotes),
// from i: a run of bytes written as they are (run > 0), or one escape, or
// one byte that is not UTF-8, decoded into buf (out) and standing for
// s[i:i+adv]. It decodes as encoding/json does: a surrogate pair's two
// escapes are one character, and a lone surrogate or a byte that is not
// UTF-8 is U+FFFD. ok is false for what is not a JSON string's contents.
func unquoteNext(s []byte, i int, buf *[utf8.UTFMax]byte) (run int, out []byte, adv int, ok bool) {
	j := i
	for j < len(s) {
		c := s[j]
		if c == '\\' || c == '"' || c < ' ' {
			break
		}
		if c < utf8.RuneSelf {
			j++
			continue
		}
		r, size := utf8.DecodeRune(s[j:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		j += size
	}
	if j > i {
		return j - i, nil, 0, true
	}
	switch c := s[i]; {
	case c == '"' || c < ' ':
		return 0, nil, 0, false
	case c != '\\':
		return 0, buf[:utf8.EncodeRune(buf[:], utf8.RuneError)], 1, true
	case i+1 == len(s):
		return 0, nil, 0, false
	}
	switch e := s[i+1]; e {
	case '"', '\\', '/', '\'':
		buf[0] = e
	case 'b':
		buf[0] = '\b'
	case 'f':
		buf[0] = '\f'
	case 'n':
		buf[0] = '\n'
	case 'r':
		buf[0] = '\r'
	case 't':
		buf[0] = '\t'
	case 'u':
		r := hex4(s[i+2:])
		if r < 0 {
			return 0, nil, 0, false
		}
		adv = 6
		if utf16.IsSurrogate(r) {
			r2 := rune(-1)
			if i+8 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				r2 = hex4(s[i+8:])
			}
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				r, adv = d, 12
			} else {
				r = utf8.RuneError
			}
		}
		return 0, buf[:utf8.EncodeRune(buf[:], r)], adv, true
	default:
		return 0, nil, 0, false
	}
	return 0, buf[:1], 2, true
}

// hex4 is the number the four hex digits that s starts with write, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquotedLen is the length of s, a JSON string's contents, unquoted.
func unquotedLen(s []byte) (int, bool) {
	var buf [utf8.UTFMax]byte
	n := 0
	for i := 0; i < len(s); {
		run, out, adv, ok := unquoteNext(s, i, &buf)
		if !ok {
			return 0, false
		}
		if run > 0 {
			n, i = n+run, i+run
			continue
		}
		n, i = n+len(out), i+adv
	}
	return n, true
}

// appendUnquoted appends s, a JSON string's contents (unquotedLen said
// so), unquoted.
func appendUnquoted(dst, s []byte) []byte {
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(s); {
		run, out, adv, _ := unquoteNext(s, i, &buf)
		if run > 0 {
			dst, i = append(dst, s[i:i+run]...), i+run
			continue
		}
		dst, i = append(dst, out...), i+adv
	}
	return dst
}
