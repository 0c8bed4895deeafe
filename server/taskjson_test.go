package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// taskJSONCases are tasks of every shape appendTask03 writes itself or
// hands to json.Marshal.
func taskJSONCases() map[string]*a2a.Task {
	ts := time.Date(2026, 12, 7, 4, 36, 2, 816179796, time.UTC)
	zoned := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 5*3600+30*60))
	odd := "quote\" back\\ nl\n cr\r tab\t bs\b ff\f nul\x00 us\x1f <tag> & amp \u2028 \u2029 é 日本 😀 bad\xff\xfe end"
	msg := &a2a.Message{ID: "m-1", ContextID: "c-1", Role: a2a.MessageRoleUser, TaskID: "t-1",
		Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}
	full := &a2a.Message{
		ID: "m-2", ContextID: "c-1", Role: a2a.MessageRoleAgent, TaskID: "t-1",
		Extensions:     []string{"https://ext/1", odd},
		Metadata:       map[string]any{"b": true, "a": "x", "n": nil, "i": 42, "f": 1.5e-7, "big": 1e21, "neg": -3},
		ReferenceTasks: []a2a.TaskID{"t-0", "t-00"},
		Parts: a2a.ContentParts{
			a2a.TextPart{Text: odd, Metadata: map[string]any{"k": "v"}},
			&a2a.TextPart{Text: "pointer"},
			a2a.DataPart{Data: map[string]any{"list": []any{1, "two", 3.25, nil, []any{}, map[string]any{}}, "nested": map[string]any{"z": 1, "y": []any{true}}}},
			&a2a.DataPart{Data: nil, Metadata: map[string]any{"m": int64(-7)}},
			a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: "f.txt", MimeType: "text/plain"}, URI: "agent://blob/1"}},
			a2a.FilePart{File: a2a.FileBytes{Bytes: "aGVsbG8="}},
		},
	}
	return map[string]*a2a.Task{
		"figure 2's": {
			ID: "t-1", ContextID: "c-1",
			Artifacts: []*a2a.Artifact{{ID: "t-1.distillate", Name: "distillate", Parts: a2a.ContentParts{a2a.TextPart{Text: "echo: hello"}}}},
			History:   []*a2a.Message{msg},
			Metadata: map[string]any{"agentd/caller": "", "agentd/caller_auth": "none", "agentd/started": ts.Format(time.RFC3339Nano), "agentd/status": "completed",
				"agentd/usage": map[string]any{"steps": 0, "tokens_in": 0, "tokens_out": 0}},
			Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &ts},
		},
		"empty":        {},
		"empty slices": {ID: "t", ContextID: "c", Artifacts: []*a2a.Artifact{}, History: []*a2a.Message{}, Metadata: map[string]any{}},
		"nil elements": {ID: "t", Artifacts: []*a2a.Artifact{nil, {ID: "a"}}, History: []*a2a.Message{nil, {ID: "m", Parts: a2a.ContentParts{}}}},
		"nil part":     {ID: "t", History: []*a2a.Message{{ID: "m", Parts: a2a.ContentParts{nil, (*a2a.TextPart)(nil), (*a2a.DataPart)(nil)}}}},
		"odd strings":  {ID: a2a.TaskID(odd), ContextID: odd, Metadata: map[string]any{odd: odd, "<": "&"}, Status: a2a.TaskStatus{State: a2a.TaskState(odd)}},
		"every field": {
			ID: "t-1", ContextID: "c-1",
			Artifacts: []*a2a.Artifact{{ID: "a", Description: "d", Name: "n", Extensions: []string{"e"}, Metadata: map[string]any{"x": []any{map[string]any{"y": "z"}}},
				Parts: full.Parts}},
			History:  []*a2a.Message{msg, full},
			Metadata: map[string]any{"struct": struct{ A int }{1}, "u": uint64(math.MaxUint64), "i32": int32(-1), "i8": int8(3), "float": 0.1, "num": json.Number("12")},
			Status:   a2a.TaskStatus{State: a2a.TaskStateInputRequired, Message: full, Timestamp: &zoned},
		},
		"deep": {ID: "t", Metadata: deepMap(maxTaskJSONDepth + 5)},
	}
}

func deepMap(n int) map[string]any {
	m := map[string]any{"leaf": "x"}
	for i := range n {
		if i%2 == 0 {
			m = map[string]any{"m": m, "s": "x"}
		} else {
			m = map[string]any{"l": []any{1, m}}
		}
	}
	return m
}

// TestAppendTask03MatchesMarshalJSON holds the front's task encoder to
// a2a-go's: the same bytes for every shape of task.
func TestAppendTask03MatchesMarshalJSON(t *testing.T) {
	for name, task := range taskJSONCases() {
		want, err := task.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: MarshalJSON: %v", name, err)
		}
		got, ok := appendTask03(nil, task)
		if !ok {
			t.Fatalf("%s: appendTask03 refused a task MarshalJSON encodes", name)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestAppendTask03RefusesWhatMarshalJSONRefuses: where MarshalJSON fails,
// so does appendTask03, and the front answers as it did (an internal error
// "could not encode the result"), not with a half-written task.
func TestAppendTask03RefusesWhatMarshalJSONRefuses(t *testing.T) {
	late := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for name, task := range map[string]*a2a.Task{
		"a channel":        {ID: "t", Metadata: map[string]any{"c": make(chan int)}},
		"NaN":              {ID: "t", History: []*a2a.Message{{ID: "m", Parts: a2a.ContentParts{a2a.DataPart{Data: map[string]any{"x": math.NaN()}}}}}},
		"a year past 9999": {ID: "t", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &late}},
		"a cycle":          {ID: "t", Metadata: cyclic},
	} {
		if _, err := task.MarshalJSON(); err == nil {
			t.Fatalf("%s: MarshalJSON encodes it; the case is wrong", name)
		}
		if _, ok := appendTask03(nil, task); ok {
			t.Errorf("%s: appendTask03 encoded a task MarshalJSON refuses", name)
		}
		rec := httptest.NewRecorder()
		writeRPC(rec, json.RawMessage("7"), task, nil, toRPCError)
		if body := rec.Body.String(); !strings.Contains(body, `"could not encode the result"`) || !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":7,"error":`) {
			t.Errorf("%s: answer %s", name, body)
		}
	}
}

// TestWriteRPCTask: a task result is the envelope around a2a-go's encoding
// of the task, whatever the id's form.
func TestWriteRPCTask(t *testing.T) {
	task := taskJSONCases()["figure 2's"]
	enc, _ := task.MarshalJSON()
	for _, id := range []string{`1`, `"a<b"`, `-2.5e3`, `null`} {
		rec := httptest.NewRecorder()
		writeRPC(rec, json.RawMessage(id), task, nil, toRPCError)
		want, _ := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: json.RawMessage(id), Result: json.RawMessage(enc)})
		if got := rec.Body.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("id %s:\n got %s\nwant %s", id, got, want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("id %s: Content-Type %q", id, ct)
		}
	}
}

// TestAppendTask03Allocs pins the encoder of figure 2's answer at no
// allocation into a buffer with room (a2a-go's MarshalJSON makes 27).
func TestAppendTask03Allocs(t *testing.T) {
	task := taskJSONCases()["figure 2's"]
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf, _ = appendTask03(buf[:0], task) }); n != 0 {
		t.Errorf("appendTask03: %v allocations, want 0", n)
	}
}

// FuzzAppendJSONString holds appendJSONString to json.Marshal's encoding of
// a string.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\u2028\u2029", "\xff", "\x00\x1f\x7f", "é😀", "\"\\\b\f\n\r\t", "a\xed\xa0\x80b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

// headerOnlyWriter is a ResponseWriter that keeps its header alone.
type headerOnlyWriter struct{ h http.Header }

func (d *headerOnlyWriter) Header() http.Header         { return d.h }
func (d *headerOnlyWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *headerOnlyWriter) WriteHeader(int)             {}

// TestWriteRPCTaskAllocs pins the answer of figure 2's send, envelope and
// task, at two allocations (the Content-Type header's value) where encoding
// the task with a2a-go's MarshalJSON made 28; the bound leaves room for the
// race detector, under which sync.Pool drops a quarter of what it is given
// (a new answer buffer, grown).
func TestWriteRPCTaskAllocs(t *testing.T) {
	task := taskJSONCases()["figure 2's"]
	w := &headerOnlyWriter{h: http.Header{}}
	id := json.RawMessage("12")
	writeRPC(w, id, task, nil, toRPCError) // the pooled buffer grown
	if n := testing.AllocsPerRun(100, func() { writeRPC(w, id, task, nil, toRPCError) }); n > 8 {
		t.Errorf("writeRPC of a task: %v allocations, want at most 8", n)
	}
}
