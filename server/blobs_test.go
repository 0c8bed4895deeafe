package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
)

// mapBlobs are blobs all stored by the task "t1".
type mapBlobs map[string]string

func (m mapBlobs) ReadBlob(id string) ([]byte, string, string, bool) {
	c, ok := m[id]
	return []byte(c), "text/markdown; charset=utf-8", "t1", ok
}

// TestBlobRoute serves a stored distillate over a real socket (in the
// loopback development mode, where every caller is the same anonymous peer).
func TestBlobRoute(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), doneExec{}, nil)
	if err := engine.OpenTask(context.Background(), &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}),
		Blobs: mapBlobs{"0192-ab_C": "# the whole result"}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/blobs/0192-ab_C")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "# the whole result" {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/markdown; charset=utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("headers = %v", resp.Header)
	}
	for _, path := range []string{"/blobs/unknown", "/blobs/..%2Fetc", "/blobs/a.b", "/blobs/"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, resp.StatusCode)
		}
	}
	// Without a source the route does not exist.
	rec := httptest.NewRecorder()
	testHandler(0).ServeHTTP(rec, httptest.NewRequest("GET", "/blobs/0192-ab_C", nil))
	if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET without a blob source = %d", rec.Code)
	}
}
