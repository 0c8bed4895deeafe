package tasks

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
)

// Text every store holds. PostgreSQL's text refuses a NUL byte and invalid
// UTF-8, where SQLite and memory take both; so that the same input gets the
// same answer from every store, a store holds neither in the text it keys
// or filters tasks by (a task's id, context id, first message's id and
// caller; a webhook's id). A lookup by such text finds nothing, as for any
// unknown value; a write of it is refused (CheckNewTask, CheckPushID).

// Storable reports whether every store can hold s as text: it is valid
// UTF-8 without a NUL byte.
func Storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// CheckNewTask returns an error wrapping a2a.ErrInvalidParams, naming the
// field, when a task to be created by owner holds text a store cannot hold
// (Storable) in its id, its context id, its first message's id or its
// caller's name; nil otherwise.
func CheckNewTask(t *a2a.Task, owner string) error {
	for _, f := range []struct{ name, value string }{
		{"task id", string(t.ID)}, {"contextId", t.ContextID}, {"messageId", MessageKey(t)}, {"caller", owner},
	} {
		if err := checkText(f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

// CheckPushID returns an error wrapping a2a.ErrInvalidParams when a
// webhook's config id is text a store cannot hold (Storable); nil
// otherwise.
func CheckPushID(id string) error { return checkText("push notification config id", id) }

func checkText(field, value string) error {
	if Storable(value) {
		return nil
	}
	why := "invalid UTF-8"
	if strings.ContainsRune(value, 0) {
		why = "a NUL character"
	}
	return fmt.Errorf("tasks: the %s holds %s, which no task store keeps: %w", field, why, a2a.ErrInvalidParams)
}
