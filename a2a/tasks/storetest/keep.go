package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
)

// testKeepMessage: a MessageKeeper writes a running task's snapshot with
// the first message it holds in place of the hollow copy it is handed,
// exactly (whatever the message's text holds, whatever comes before the
// history in the snapshot), and refuses, changing nothing, a snapshot whose
// first message it does not hold; it reads that message back exactly.
func testKeepMessage(t *testing.T, b Backend) {
	c, s, k := openAs[tasks.MessageKeeper](t, b, "the store is not a MessageKeeper")
	// Text a scanner of the JSON could take for the history: quotes,
	// backslashes, brackets, the keys themselves; and HTML's characters,
	// which the encoding escapes.
	tricky := `a "quoted" \\ back\slash \" ], }, {"history":[{"kind":"message","messageId":"msg-keep"}]} <b>&amp; é ✓` + "\n\t"
	whole := task("keep", a2a.TaskStateSubmitted, "ctx-keep", c.now())
	whole.History[0].Parts = a2a.ContentParts{
		a2a.TextPart{Text: "the objective: " + strings.Repeat(tricky, 1000)},
		a2a.DataPart{Data: map[string]any{"history": []any{map[string]any{"kind": "message", "messageId": "msg-keep"}}}},
		a2a.TextPart{Text: "a second text part " + tricky},
	}
	whole.History[0].Metadata = map[string]any{"k": tricky}
	must(t, s.Create(ctx, whole, "alice"))

	// The engine's hollow copy: the first message's text parts emptied.
	next := *whole
	hollow := *whole.History[0]
	hollow.Parts = a2a.ContentParts{a2a.TextPart{}, whole.History[0].Parts[1], a2a.TextPart{}}
	next.History = []*a2a.Message{&hollow, {ID: "m2", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.TextPart{Text: tricky}}}}
	next.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: c.at(0)}
	next.Artifacts = []*a2a.Artifact{{ID: "art", Parts: a2a.ContentParts{a2a.TextPart{Text: tricky}},
		Metadata: map[string]any{"history": []any{map[string]any{"kind": "message", "messageId": "msg-keep", "parts": []any{}}}}}}
	next.Metadata = map[string]any{"history": tricky}
	must(t, k.PutKeeping(ctx, &next))
	want := next
	want.History = []*a2a.Message{whole.History[0], next.History[1]}
	got, owner, err := s.Get(ctx, "keep")
	must(t, err)
	if owner != "alice" {
		t.Fatalf("owner %q", owner)
	}
	same(t, "the task written keeping its first message", got, &want)

	// Read back: the hollow copy's empty texts from the stored message.
	m, err := k.KeptMessage(ctx, "keep", &hollow)
	must(t, err)
	same(t, "the first message read back", &a2a.Task{History: []*a2a.Message{m}}, &a2a.Task{History: whole.History[:1]})

	// Again: the message kept is the one the last write kept.
	next.Status.State = a2a.TaskStateInputRequired
	must(t, k.PutKeeping(ctx, &next))
	want.Status.State = a2a.TaskStateInputRequired
	got, _, err = s.Get(ctx, "keep")
	must(t, err)
	same(t, "the task written keeping its first message twice", got, &want)

	// A first message the store does not hold: refused, nothing changed.
	other := next
	stranger := hollow
	stranger.ID = "msg-other"
	other.History = []*a2a.Message{&stranger}
	other.Status.State = a2a.TaskStateFailed
	if err := k.PutKeeping(ctx, &other); !errors.Is(err, tasks.ErrNotKept) {
		t.Fatalf("another first message: %v, want ErrNotKept", err)
	}
	if _, err := k.KeptMessage(ctx, "keep", &stranger); !errors.Is(err, tasks.ErrNotKept) {
		t.Fatalf("another first message read back: %v, want ErrNotKept", err)
	}
	notText := hollow
	notText.Parts = a2a.ContentParts{a2a.TextPart{}, a2a.TextPart{}}
	if _, err := k.KeptMessage(ctx, "keep", &notText); !errors.Is(err, tasks.ErrNotKept) {
		t.Fatalf("a first message of other parts read back: %v, want ErrNotKept", err)
	}
	none := next
	none.History = nil
	if err := k.PutKeeping(ctx, &none); !errors.Is(err, tasks.ErrNotKept) {
		t.Fatalf("no first message: %v, want ErrNotKept", err)
	}
	got, _, err = s.Get(ctx, "keep")
	must(t, err)
	same(t, "the task after refused writes", got, &want)

	// An unknown task.
	unknown := next
	unknown.ID = "nope"
	if err := k.PutKeeping(ctx, &unknown); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("unknown task: %v, want ErrTaskNotFound", err)
	}
	if _, err := k.KeptMessage(ctx, "nope", &hollow); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("unknown task read back: %v, want ErrTaskNotFound", err)
	}
}
