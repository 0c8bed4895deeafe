package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/jsonscan"
)

// A running task's snapshot written with its first message kept
// (tasks.MessageKeeper): the engine hands the store a snapshot whose first
// message is a copy of the stored one with its large text left out, and the
// store writes that snapshot with the stored message's bytes in its place,
// copied, never decoded (the encoding is the message's own: the one the
// store wrote it with).

// Kept is the encoding of a snapshot (EncodeTask) that a store writes with
// its first history message taken from the stored snapshot (KeptIn).
type Kept struct {
	snap       []byte
	start, end int    // the first history message's bytes in snap
	head       []byte // how that message's encoding begins: its kind and id
}

// EncodeKept encodes t, whose first history message stands for the stored
// snapshot's first message of the same id.
func EncodeKept(t *a2a.Task) (Kept, error) {
	if len(t.History) == 0 || t.History[0] == nil {
		return Kept{}, fmt.Errorf("store: encode task %s keeping its first message: %w: it has none", t.ID, tasks.ErrNotKept)
	}
	snap, err := EncodeTask(t)
	if err != nil {
		return Kept{}, err
	}
	start, end, err := firstMessage(snap)
	if err != nil {
		return Kept{}, fmt.Errorf("store: encode task %s keeping its first message: %w", t.ID, err)
	}
	id, err := json.Marshal(t.History[0].ID)
	if err != nil {
		return Kept{}, fmt.Errorf("store: encode task %s keeping its first message: %w", t.ID, err)
	}
	head := append([]byte(`{"kind":"message","messageId":`), id...)
	if !bytes.HasPrefix(snap[start:end], head) {
		return Kept{}, fmt.Errorf("store: encode task %s keeping its first message: %w: its encoding does not begin with its id", t.ID, tasks.ErrNotKept)
	}
	return Kept{snap: snap, start: start, end: end, head: head}, nil
}

// KeptIn is the snapshot to store: k's with its first history message
// replaced by stored's (the snapshot the store holds), which must be the
// message of the same id; an error wrapping tasks.ErrNotKept when it is not.
func (k Kept) KeptIn(stored []byte) ([]byte, error) {
	start, end, err := firstMessage(stored)
	if err != nil {
		return nil, fmt.Errorf("store: the stored snapshot: %w", err)
	}
	msg := stored[start:end]
	if !bytes.HasPrefix(msg, k.head) || len(msg) == len(k.head) || msg[len(k.head)] != ',' && msg[len(k.head)] != '}' {
		return nil, fmt.Errorf("store: the stored snapshot's first message is not the task's: %w", tasks.ErrNotKept)
	}
	out := make([]byte, 0, len(k.snap)-(k.end-k.start)+len(msg))
	out = append(out, k.snap[:k.start]...)
	out = append(out, msg...)
	return append(out, k.snap[k.end:]...), nil
}

// KeptMessage is the first message of stored, a snapshot, as hollow
// stands for it (a copy of it whose large text was left out: tasks.
// HollowAbove): hollow with the text of each of its empty text parts read
// from stored, that text alone decoded. An error wrapping tasks.ErrNotKept
// when stored's first message is not hollow's (its id) or its parts are
// not hollow's kinds.
func KeptMessage(stored []byte, hollow *a2a.Message) (*a2a.Message, error) {
	start, end, err := firstMessage(stored)
	if err != nil {
		return nil, fmt.Errorf("store: the stored snapshot: %w", err)
	}
	msg := stored[start:end]
	id, err := json.Marshal(hollow.ID)
	if err != nil {
		return nil, err
	}
	if head := append([]byte(`{"kind":"message","messageId":`), id...); !bytes.HasPrefix(msg, head) {
		return nil, fmt.Errorf("store: the stored snapshot's first message is not the task's: %w", tasks.ErrNotKept)
	}
	ps, _, err := member(msg, "parts")
	if err != nil {
		return nil, fmt.Errorf("store: the stored first message: %w", err)
	}
	out := *hollow
	out.Parts = slices.Clone(hollow.Parts)
	for i, p := range hollow.Parts {
		tp, ok := p.(a2a.TextPart)
		if !ok || tp.Text != "" {
			continue
		}
		es, ee, err := element(msg, ps, i)
		if err != nil {
			return nil, fmt.Errorf("store: the stored first message's part %d: %w", i, err)
		}
		part := msg[es:ee]
		ks, ke, err := member(part, "kind")
		if err != nil || string(part[ks:ke]) != `"text"` {
			return nil, fmt.Errorf("store: the stored first message's part %d is not text: %w", i, tasks.ErrNotKept)
		}
		ts, te, err := member(part, "text")
		if err != nil {
			return nil, fmt.Errorf("store: the stored first message's part %d: %w", i, err)
		}
		if err := json.Unmarshal(part[ts:te], &tp.Text); err != nil {
			return nil, fmt.Errorf("store: the stored first message's part %d: %w", i, err)
		}
		out.Parts[i] = tp
	}
	return &out, nil
}

// firstMessage finds the first element of the top-level "history" array of
// snap, a task's JSON: its bytes are snap[start:end]. An error wrapping
// tasks.ErrNotKept when snap has none, or is not a JSON object.
func firstMessage(snap []byte) (start, end int, err error) {
	hs, _, err := member(snap, "history")
	if err != nil {
		return 0, 0, err
	}
	return element(snap, hs, 0)
}

// member finds the value of key in the JSON object b: b[start:end]. An
// error wrapping tasks.ErrNotKept when b has no such member, or is not an
// object.
func member(b []byte, key string) (start, end int, err error) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, fmt.Errorf("%w: not a JSON object", tasks.ErrNotKept)
	}
	i++
	for {
		i = jsonscan.SkipSpace(b, i)
		if i < len(b) && b[i] == '}' {
			return 0, 0, fmt.Errorf("%w: it has no %q", tasks.ErrNotKept, key)
		}
		if i >= len(b) || b[i] != '"' {
			return 0, 0, fmt.Errorf("%w: bad JSON at byte %d", tasks.ErrNotKept, i)
		}
		k := i
		if i, err = skipValue(b, i); err != nil {
			return 0, 0, err
		}
		name := b[k+1 : i-1] // the encoder's keys have no escapes
		if i = jsonscan.SkipSpace(b, i); i >= len(b) || b[i] != ':' {
			return 0, 0, fmt.Errorf("%w: bad JSON at byte %d", tasks.ErrNotKept, i)
		}
		i = jsonscan.SkipSpace(b, i+1)
		end, err := skipValue(b, i)
		if err != nil {
			return 0, 0, err
		}
		if string(name) == key {
			return i, end, nil
		}
		if i = jsonscan.SkipSpace(b, end); i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// element finds the n-th element of the JSON array at b[i]: b[start:end].
func element(b []byte, i, n int) (start, end int, err error) {
	if i >= len(b) || b[i] != '[' {
		return 0, 0, fmt.Errorf("%w: not a JSON array", tasks.ErrNotKept)
	}
	i++
	for k := 0; ; k++ {
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) || b[i] == ']' {
			return 0, 0, fmt.Errorf("%w: the array has no element %d", tasks.ErrNotKept, n)
		}
		end, err := skipValue(b, i)
		if err != nil {
			return 0, 0, err
		}
		if k == n {
			return i, end, nil
		}
		if i = jsonscan.SkipSpace(b, end); i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// skipValue returns the index just past the JSON value at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: the JSON ends early", tasks.ErrNotKept)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, fmt.Errorf("%w: the JSON ends early", tasks.ErrNotKept)
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i, nil
			}
			i++
		}
		return i, nil
	}
}

// skipString returns the index just past the JSON string at b[i] (a quote).
func skipString(b []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, fmt.Errorf("%w: the JSON ends in a string", tasks.ErrNotKept)
		}
		q := i + j
		n := 0 // backslashes just before the quote: an odd number escapes it
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		i = q + 1
	}
}
