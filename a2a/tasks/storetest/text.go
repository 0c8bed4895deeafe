package storetest

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
)

// badText is text no store can hold, by what it holds: PostgreSQL's text
// refuses a NUL byte and invalid UTF-8, where SQLite and memory take both.
var badText = []struct{ name, text string }{
	{"NUL", "a\x00b"},
	{"invalid UTF-8", "a\xffb"},
}

// Text no store can hold gets one answer from every store: a lookup by such
// an id (a task's, a webhook's) finds nothing (a2a.ErrTaskNotFound, as for
// any unknown id), a list filtered by such a context or caller is empty, and
// a write of it (a task's id, context id, first message's id or caller; a
// webhook's id) is refused as invalid params (a2a.ErrInvalidParams, naming
// the field), storing nothing. The store's other tasks are untouched. A
// webhook's address and token, kept as JSON, hold a NUL in every store.
func testUnstorableText(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	must(t, s.Create(ctx, task("t1", a2a.TaskStateWorking, "c", c.now()), "alice"))
	hook := tasks.PushTarget{Config: a2a.PushConfig{URL: "https://a.test/hook"}}
	for _, bt := range badText {
		t.Run(bt.name, func(t *testing.T) {
			bad := bt.text
			notFound := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Fatalf("%s: %v, want a2a.ErrTaskNotFound", what, err)
				}
			}
			_, _, err := s.Get(ctx, a2a.TaskID(bad))
			notFound("Get", err)
			notFound("Put", s.Put(ctx, task(bad, a2a.TaskStateWorking, "c", c.now())))
			_, err = s.SetPush(ctx, a2a.TaskID(bad), hook)
			notFound("SetPush", err)
			_, err = s.ListPush(ctx, a2a.TaskID(bad))
			notFound("ListPush", err)
			_, err = s.GetPush(ctx, a2a.TaskID(bad), "")
			notFound("GetPush", err)
			notFound("DeletePush", s.DeletePush(ctx, a2a.TaskID(bad), "x"))
			_, err = s.GetPush(ctx, "t1", bad)
			notFound("GetPush of such a webhook", err)
			if err := s.DeletePush(ctx, "t1", bad); err != nil {
				t.Fatalf("DeletePush of such a webhook: %v, want nothing deleted, as for any unknown one", err)
			}
			for _, q := range []tasks.ListQuery{{ContextID: bad, AnyOwner: true}, {Owner: bad}} {
				page, err := s.List(ctx, q)
				if err != nil || len(page.Tasks) != 0 || page.TotalSize != 0 {
					t.Fatalf("List %+v: %d tasks, %v; want none", q, len(page.Tasks), err)
				}
			}

			refused := func(what string, err error, id a2a.TaskID) {
				t.Helper()
				if !errors.Is(err, a2a.ErrInvalidParams) {
					t.Fatalf("%s: %v, want a2a.ErrInvalidParams", what, err)
				}
				if _, _, err := s.Get(ctx, id); !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Fatalf("%s: the task was stored (%v)", what, err)
				}
			}
			refused("Create with such an id", s.Create(ctx, task(bad, a2a.TaskStateWorking, "c", c.now()), "alice"), a2a.TaskID(bad))
			refused("Create with such a context id", s.Create(ctx, task("t2", a2a.TaskStateWorking, bad, c.now()), "alice"), "t2")
			m := task("t3", a2a.TaskStateWorking, "c", c.now())
			m.History[0].ID = bad
			refused("Create with such a message id", s.Create(ctx, m, "alice"), "t3")
			refused("Create by such a caller", s.Create(ctx, task("t4", a2a.TaskStateWorking, "c", c.now()), bad), "t4")
			withID := hook
			withID.Config.ID = bad
			if _, err := s.SetPush(ctx, "t1", withID); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("SetPush of such a webhook id: %v, want a2a.ErrInvalidParams", err)
			}
			if list, err := s.ListPush(ctx, "t1"); err != nil || len(list) != 0 {
				t.Fatalf("the webhooks after SetPush of such an id: %+v %v", list, err)
			}
		})
	}
	// A webhook's address and token are kept as its config's JSON, where
	// every store holds a NUL character, and gives it back.
	nul := tasks.PushTarget{Config: a2a.PushConfig{ID: "nul", URL: "https://a.test/\x00", Token: "a\x00b"}}
	setPush(t, s, "t1", nul)
	if got, err := s.GetPush(ctx, "t1", "nul"); err != nil || got.Config.URL != nul.Config.URL || got.Config.Token != nul.Config.Token {
		t.Fatalf("a webhook with a NUL in its address and token: %+v %v", got, err)
	}
	if got, owner, err := s.Get(ctx, "t1"); err != nil || owner != "alice" || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("the good task after the bad input: %v %q %v", got, owner, err)
	}
}
