package tasks

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// errBadPageToken refuses a page token this server did not issue.
var errBadPageToken = fmt.Errorf("pageToken is not one this server issued: %w", a2a.ErrInvalidParams)

// stamp is the time a task's status last changed, the List order's key.
func stamp(t *a2a.Task) time.Time {
	if t.Status.Timestamp == nil {
		return time.Time{}
	}
	return *t.Status.Timestamp
}

// cursor is a position in List order: the last task of a page.
type cursor struct {
	at time.Time
	id string
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + ":" + c.id))
}

func parseCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, errBadPageToken
	}
	ns, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, errBadPageToken
	}
	return cursor{at: time.Unix(0, n), id: id}, nil
}

// before reports whether t comes after the cursor in List order.
func (c cursor) before(t *a2a.Task) bool {
	ts := stamp(t)
	if !ts.Equal(c.at) {
		return ts.Before(c.at)
	}
	return string(t.ID) < c.id
}

// trimHistory returns t with at most n history messages (the latest), sharing
// everything else.
func trimHistory(t *a2a.Task, n *int) *a2a.Task {
	if n == nil || *n >= len(t.History) {
		return t
	}
	c := *t
	if *n <= 0 {
		c.History = nil
	} else {
		c.History = t.History[len(t.History)-*n:]
	}
	return &c
}

// PageToken is the ListPage.NextPageToken after a page whose last task has
// status timestamp at and id id: what a Store other than MemoryStore issues,
// so that every store's tokens are alike.
func PageToken(at time.Time, id a2a.TaskID) string {
	return cursor{at: at, id: string(id)}.String()
}

// ParsePageToken reads a PageToken back; a token no store issued is an error
// that wraps a2a.ErrInvalidParams.
func ParsePageToken(s string) (at time.Time, id a2a.TaskID, err error) {
	c, err := parseCursor(s)
	if err != nil {
		return time.Time{}, "", err
	}
	return c.at, a2a.TaskID(c.id), nil
}

// StatusTime is the time a task's status last changed (zero without a
// timestamp): the List order's key.
func StatusTime(t *a2a.Task) time.Time { return stamp(t) }

// TrimHistory returns t with at most n of its latest history messages (all
// of them when n is nil), sharing everything else.
func TrimHistory(t *a2a.Task, n *int) *a2a.Task { return trimHistory(t, n) }

// containsText reports whether t's A2A JSON contains text, ignoring the case
// of ASCII letters: ListQuery.Text as the memory store applies it (the
// durable stores search the same JSON, which they store).
func containsText(t *a2a.Task, text string) bool {
	b, err := t.MarshalJSON()
	if err != nil {
		return false
	}
	return strings.Contains(asciiLower(string(b)), asciiLower(text))
}

// asciiLower lowers the ASCII letters of s only, as SQLite's lower() does,
// so that every store folds the same letters.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
