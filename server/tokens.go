package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/agentd/agentd/internal/secretfile"
	"github.com/agentd/agentd/tlsconfig"
)

// MinTokenLen is the shortest static bearer token accepted.
const MinTokenLen = 16

// Tokens are static bearer tokens, each with a role and a name. They are
// compared in constant time (over SHA-256 digests, so neither the content nor
// the length of a token leaks through timing). The set can be replaced whole
// while in use (Replace: a reload of the tokens file); a lookup sees the old
// set or the new one, never a mix. Safe for concurrent use. The zero value
// holds no tokens.
//
// The file format, one token per line:
//
//	# comment
//	TOKEN ROLE NAME
//
// TOKEN is at least MinTokenLen characters without spaces; ROLE is peer or
// operator; NAME identifies the caller in logs and on the tasks it creates
// (recorded as token:NAME). Blank lines and lines starting with # are ignored;
// a repeated token or name is an error.
type Tokens struct {
	set atomic.Pointer[[]tokenEntry]
}

type tokenEntry struct {
	digest [sha256.Size]byte
	role   tlsconfig.Role
	name   string
}

// ParseTokens parses a tokens file's content; an error names the line.
func ParseTokens(data []byte) (*Tokens, error) {
	var entries []tokenEntry
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want TOKEN ROLE NAME, got %d fields", n, len(f))
		}
		if len(f[0]) < MinTokenLen {
			return nil, fmt.Errorf("line %d: token shorter than %d characters", n, MinTokenLen)
		}
		role, err := tlsconfig.ParseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		d := sha256.Sum256([]byte(f[0]))
		if digests[d] {
			return nil, fmt.Errorf("line %d: token repeated", n)
		}
		if names[f[2]] {
			return nil, fmt.Errorf("line %d: name %q repeated", n, f[2])
		}
		digests[d], names[f[2]] = true, true
		entries = append(entries, tokenEntry{digest: d, role: role, name: f[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	t := &Tokens{}
	t.set.Store(&entries)
	return t, nil
}

// LoadTokens reads a tokens file as a secret file (secretfile.Read: one its
// group or others may open is refused with an error wrapping
// secretfile.ErrMode), then parses it.
func LoadTokens(path string) (*Tokens, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseTokens(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// entries returns the current set.
func (t *Tokens) entries() []tokenEntry {
	if t == nil {
		return nil
	}
	if e := t.set.Load(); e != nil {
		return *e
	}
	return nil
}

// Replace makes from's tokens the set t holds, at once for every later
// lookup. from is not changed and may be dropped.
func (t *Tokens) Replace(from *Tokens) { t.set.Store(ptrTo(from.entries())) }

func ptrTo(e []tokenEntry) *[]tokenEntry { return &e }

// Len returns the number of tokens.
func (t *Tokens) Len() int { return len(t.entries()) }

// Lookup returns the role and name of token. Every entry is compared, so the
// time taken does not depend on which one matches.
func (t *Tokens) Lookup(token string) (role tlsconfig.Role, name string, ok bool) {
	if t == nil {
		return tlsconfig.RoleNone, "", false
	}
	d := sha256.Sum256([]byte(token))
	for _, e := range t.entries() {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			role, name, ok = e.role, e.name, true
		}
	}
	return role, name, ok
}
