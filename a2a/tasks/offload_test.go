package tasks

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/api"
)

// memOffloader keeps offloaded content by URI; full refuses everything.
type memOffloader struct {
	mu    sync.Mutex
	blobs map[string]string
	owner string
	full  bool
}

func (o *memOffloader) Offload(_ context.Context, task a2a.TaskID, owner, mediaType string, content []byte) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.full {
		return "", errors.New("blob store full")
	}
	if o.blobs == nil {
		o.blobs = map[string]string{}
	}
	uri := "https://agentd.test/blobs/" + string(task) + "-" + string(rune('a'+len(o.blobs)))
	o.blobs[uri] = mediaType + " " + string(content)
	o.owner = owner
	return uri, nil
}

// bigExec answers with a working status whose message is big, then a big
// artifact and a small one, then completed.
func bigExec(answer string) fakeExec {
	return fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: answer})))
		q.Write(ctx, &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Artifact: &a2a.Artifact{ID: "big", Parts: a2a.ContentParts{a2a.TextPart{Text: answer}, a2a.DataPart{Data: map[string]any{"small": 1.0}}}}})
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}
}

// The large parts of a finished task move out of the task store: tasks/get
// (any historyLength) returns the same messages with those parts replaced by
// file parts that say so; the blocking send's answer keeps the content.
func TestEngineOffloadsLargeParts(t *testing.T) {
	const above = 1 << 10
	big := strings.Repeat("x", 4*above)
	off := &memOffloader{}
	e := NewEngine(NewMemoryStore(10, time.Hour), bigExec(big), nil, WithOffload(off, above))
	params := a2atest.Msg(big)
	answer := a2atest.Send(t, e, params)
	if a2atest.ArtifactText(answer) != big || answer.History[0].Parts[0].(a2a.TextPart).Text != big {
		t.Fatal("the blocking send's answer lost its content")
	}
	for _, n := range []*int{nil, ptr(1), ptr(2), ptr(0)} {
		got, err := e.OnGetTask(context.Background(), &a2a.TaskQueryParams{ID: answer.ID, HistoryLength: n})
		if err != nil {
			t.Fatal(err)
		}
		want := len(answer.History)
		if n != nil {
			want = min(*n, want)
		}
		if len(got.History) != want {
			t.Fatalf("historyLength %v: %d messages, want %d", n, len(got.History), want)
		}
		for _, m := range got.History {
			for _, p := range m.Parts {
				if tp, ok := p.(a2a.TextPart); ok && len(tp.Text) > above {
					t.Fatalf("a %d-byte text part stayed in the stored history", len(tp.Text))
				}
			}
		}
	}
	got, _ := e.OnGetTask(context.Background(), &a2a.TaskQueryParams{ID: answer.ID})
	fp, ok := got.Artifacts[0].Parts[0].(a2a.FilePart)
	if !ok {
		t.Fatalf("the big artifact part is %T", got.Artifacts[0].Parts[0])
	}
	uri := fp.File.(a2a.FileURI).URI
	if off.blobs[uri] != "text/plain; charset=utf-8 "+big || off.owner != "" {
		t.Fatalf("offloaded %q: %.40q", uri, off.blobs[uri])
	}
	if m, _ := fp.Metadata[api.MetaOffloaded].(map[string]any); m["kind"] != "text" || m["bytes"] != len(big) {
		t.Fatalf("part metadata %v", fp.Metadata)
	}
	if _, ok := got.Artifacts[0].Parts[1].(a2a.DataPart); !ok {
		t.Fatal("a small part was offloaded")
	}
	if m, _ := got.Metadata[api.MetaOffloaded].(map[string]any); m["parts"] != 3 || m["bytes"] != 3*len(big) {
		t.Fatalf("task metadata %v (the message, the working status, the artifact)", got.Metadata)
	}

	// An offloader that refuses leaves the parts where they were.
	full := &memOffloader{full: true}
	e = NewEngine(NewMemoryStore(10, time.Hour), bigExec(big), nil, WithOffload(full, above))
	answer = a2atest.Send(t, e, a2atest.Msg(big))
	got, _ = e.OnGetTask(context.Background(), &a2a.TaskQueryParams{ID: answer.ID})
	if a2atest.ArtifactText(got) != big || got.Metadata[api.MetaOffloaded] != nil {
		t.Fatal("a refused offload changed the task")
	}
}

func ptr(n int) *int { return &n }
