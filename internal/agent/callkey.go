package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"hash"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/jsonscan"
)

// callKey is what the repeat check compares of a call: a digest of its wire
// name and its arguments with insignificant differences (spacing, key order)
// removed, invalid JSON as it is. It is 32 bytes however long the arguments:
// the check held the canonical arguments themselves (figure 9's 16 KiB
// handle, and its encoding's garbage, on a waiting child's heap).
//
// The arguments are hashed as they are parsed, without decoding them: the
// digest is the one of their decoded value (encoding/json's, into an any)
// in the canonical form canon writes, but a decoding allocated every string
// of the arguments and hashing them copied each again (33 KB of garbage for
// figure 9's call, which a waiting child keeps).
func callKey(wire string, args json.RawMessage) string {
	c := &canon{h: sha256.New()}
	c.writeString(wire)
	if json.Valid(args) {
		c.write([]byte{0, 'v'})
		if _, ok := c.value(args, 0); ok {
			return c.sum()
		}
		c.h.Reset() // a number out of float64's range: encoding/json refuses it too
		c.n = 0
		c.writeString(wire)
	}
	c.write([]byte{0, 'r'})
	c.write(args)
	return c.sum()
}

// canon writes a JSON value in a form that is the same for equal values and
// differs for others: each value tagged, strings and containers with their
// lengths, an object's keys sorted (the last of a repeated key, as
// encoding/json keeps), numbers as float64. It reads valid JSON only.
// Its writes go to the hash through a buffer of its own, so that nothing
// it writes is copied to the heap first.
type canon struct {
	h     hash.Hash
	buf   [512]byte
	n     int
	count int  // the bytes written while counting
	dry   bool // counting: nothing reaches the hash
}

func (c *canon) write(b []byte) {
	if c.dry {
		c.count += len(b)
		return
	}
	for len(b) > 0 {
		if c.n == len(c.buf) {
			c.h.Write(c.buf[:])
			c.n = 0
		}
		k := copy(c.buf[c.n:], b)
		c.n += k
		b = b[k:]
	}
}

func (c *canon) writeString(s string) {
	for len(s) > 0 {
		if c.n == len(c.buf) {
			c.h.Write(c.buf[:])
			c.n = 0
		}
		k := copy(c.buf[c.n:], s)
		c.n += k
		s = s[k:]
	}
}

func (c *canon) writeByte(b byte) { c.write([]byte{b}) }

// tagged writes tag, n and ':'.
func (c *canon) tagged(tag byte, n int) {
	var b [24]byte
	c.write(append(strconv.AppendInt(append(b[:0], tag), int64(n), 10), ':'))
}

func (c *canon) sum() string {
	c.h.Write(c.buf[:c.n])
	return string(c.h.Sum(nil))
}

// value writes the value that starts at or after b[i] and returns where it
// ends; ok is false for a number out of float64's range.
func (c *canon) value(b []byte, i int) (end int, ok bool) {
	i = jsonscan.SkipSpace(b, i)
	switch b[i] {
	case 'n':
		c.writeByte('n')
		return i + 4, true
	case 't':
		c.writeByte('t')
		return i + 4, true
	case 'f':
		c.writeByte('f')
		return i + 5, true
	case '"':
		end, _ = jsonscan.StringEnd(b, i)
		c.str(b[i:end])
		return end, true
	case '[':
		return c.array(b, i)
	case '{':
		return c.object(b, i)
	}
	end = i
	for end < len(b) && numberByte(b[end]) {
		end++
	}
	f, err := strconv.ParseFloat(string(b[i:end]), 64)
	if err != nil {
		return end, false
	}
	var d [32]byte
	c.write(append(strconv.AppendFloat(append(d[:0], 'd'), f, 'g', -1, 64), ';'))
	return end, true
}

// str writes the string literal lit as its decoded value: its length, then
// its bytes, decoded twice (counted, then written) rather than into a copy.
func (c *canon) str(lit []byte) {
	body := lit[1 : len(lit)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		c.tagged('s', len(body))
		c.write(body)
		return
	}
	c.dry, c.count = true, 0
	c.unquote(body)
	c.dry = false
	c.tagged('s', c.count)
	c.unquote(body)
}

// unquote writes the decoded bytes of a string literal's body as
// encoding/json decodes them (invalid UTF-8 and lone surrogates as U+FFFD).
func (c *canon) unquote(s []byte) {
	var rb [utf8.UTFMax]byte
	for r := 0; r < len(s); {
		switch ch := s[r]; {
		case ch == '\\':
			switch e := s[r+1]; e {
			case 'b':
				c.writeByte('\b')
			case 'f':
				c.writeByte('\f')
			case 'n':
				c.writeByte('\n')
			case 'r':
				c.writeByte('\r')
			case 't':
				c.writeByte('\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = hex4(s[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						c.write(utf8.AppendRune(rb[:0], dec))
						continue
					}
					rr = unicode.ReplacementChar
				}
				c.write(utf8.AppendRune(rb[:0], rr))
				continue
			default:
				c.writeByte(e)
			}
			r += 2
		case ch < utf8.RuneSelf:
			c.writeByte(ch)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			c.write(utf8.AppendRune(rb[:0], rr)) // RuneError for an invalid byte, as encoding/json
			r += size
		}
	}
}

func (c *canon) array(b []byte, i int) (int, bool) {
	n := 0
	for j := i + 1; ; n++ {
		j = jsonscan.SkipSpace(b, j)
		if b[j] == ']' {
			break
		}
		j = jsonscan.SkipSpace(b, jsonscan.ValueEnd(b, j))
		if b[j] == ',' {
			j++
		}
	}
	c.tagged('a', n)
	j := jsonscan.SkipSpace(b, i+1)
	for b[j] != ']' {
		end, ok := c.value(b, j)
		if !ok {
			return end, false
		}
		j = jsonscan.SkipSpace(b, end)
		if b[j] == ',' {
			j = jsonscan.SkipSpace(b, j+1)
		}
	}
	return j + 1, true
}

// member is one of an object's members: its decoded key and where its
// value starts.
type member struct {
	key []byte
	at  int
}

func (c *canon) object(b []byte, i int) (int, bool) {
	var ms []member
	j := jsonscan.SkipSpace(b, i+1)
	for b[j] != '}' {
		end, _ := jsonscan.StringEnd(b, j)
		key := b[j+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			var s string
			_ = json.Unmarshal(b[j:end], &s) // valid: the arguments are
			key = []byte(s)
		}
		j = jsonscan.SkipSpace(b, end)
		j = jsonscan.SkipSpace(b, j+1) // ':'
		ms = append(ms, member{key: key, at: j})
		j = jsonscan.SkipSpace(b, jsonscan.ValueEnd(b, j))
		if b[j] == ',' {
			j = jsonscan.SkipSpace(b, j+1)
		}
	}
	// Sorted by key, stably: of a repeated key, the last is kept.
	slices.SortStableFunc(ms, func(x, y member) int { return bytes.Compare(x.key, y.key) })
	kept := ms[:0]
	for k, m := range ms {
		if k+1 < len(ms) && bytes.Equal(ms[k+1].key, m.key) {
			continue
		}
		kept = append(kept, m)
	}
	c.tagged('o', len(kept))
	for _, m := range kept {
		c.tagged('s', len(m.key))
		c.write(m.key)
		if _, ok := c.value(b, m.at); !ok {
			return j + 1, false
		}
	}
	return j + 1, true
}

func numberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
