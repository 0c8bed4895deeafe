package console

import (
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// A snapshot carries the questions tasks wait on (Config.Questions), none
// as an empty list: the page's waiting view is drawn from them.
func TestSnapshotQuestions(t *testing.T) {
	tree := (&fakeTree{}).tree
	if qs := New(Config{Tree: tree}).Snapshot().Questions; qs == nil || len(qs) != 0 {
		t.Fatalf("questions without a source: %#v, want an empty list", qs)
	}
	q := api.PendingQuestion{TaskID: "t1", AgentPath: "0.1", Text: "Which color?", Since: time.Unix(5, 0).UTC()}
	c := New(Config{Tree: tree, Questions: func() []api.PendingQuestion { return []api.PendingQuestion{q} }})
	if qs := c.Snapshot().Questions; len(qs) != 1 || qs[0].TaskID != "t1" || qs[0].Text != "Which color?" {
		t.Fatalf("questions = %+v", qs)
	}
}
