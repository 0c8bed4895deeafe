package intelligence

import (
	"encoding/json"
	"io"
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
	segs []bodySeg // the body: each segment's skel bytes, then its string
	size int64
}

// bodySeg is skel[from:to], then str escaped (without its quotes, which are
// in skel).
type bodySeg struct {
	from, to int
	str      string
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

// value appends v encoded by encoding/json.
func (b *jsonBody) value(v any) error {
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.skel = append(b.skel, enc...)
	return nil
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
		b.size += int64(escapedLen(s.str))
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
		if r.off == len(s.str) {
			r.seg, r.inStr, r.off = r.seg+1, false, 0
			continue
		}
		safe, esc, adv := nextEscaped(s.str, r.off, len(p)-n, &r.buf)
		if safe > 0 {
			c := copy(p[n:], s.str[r.off:r.off+safe])
			n, r.off = n+c, r.off+c
			continue
		}
		r.pending, r.off = esc, r.off+adv
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Close lets go of the body.
func (r *bodyReader) Close() error { return nil }

// nextEscaped says how s from i is written in a JSON string: either a run of
// at most limit safe bytes, written as they are (safe > 0), or one
// character's escape or bytes (esc, held in buf) standing for s[i:i+adv]. It
// escapes what json.Marshal does (escapeHTML on).
func nextEscaped(s string, i, limit int, buf *[8]byte) (safe int, esc []byte, adv int) {
	j, end := i, min(len(s), i+max(limit, 1))
	for j < end && s[j] < utf8.RuneSelf && htmlSafe[s[j]] {
		j++
	}
	if j > i {
		return j - i, nil, 0
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
	c, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case c == utf8.RuneError && size == 1:
		return 0, append(buf[:0], `\ufffd`...), 1
	case c == '\u2028' || c == '\u2029':
		return 0, append(buf[:0], '\\', 'u', '2', '0', '2', hex[c&0xF]), size
	}
	return 0, append(buf[:0], s[i:i+size]...), size
}

// htmlSafe says whether an ASCII byte is written as it is in a JSON string
// by json.Marshal.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendEscaped appends s to dst as a JSON string, quoted.
func appendEscaped(dst []byte, s string) []byte {
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
func escapedLen(s string) int {
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
