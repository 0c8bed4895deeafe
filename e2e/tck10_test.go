package e2e

// The checks of the public A2A TCK at its 1.0 release candidate
// (a2aproject/a2a-tck 410ba92, JSON-RPC transport) that agentd failed, ported
// to Go as black-box tests against `agentd serve` so `make test` keeps them
// without Python. Where the TCK's own check contradicts the 1.0 spec, the test
// here checks what the spec says instead (docs/conformance.md gives the
// reasons). The facts are the TCK's and the spec's; the code is not.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// v1Page is a ListTasks result as a 1.0 client reads it. The pagination
// fields are pointers so a missing one (all four are REQUIRED) shows.
type v1Page struct {
	Tasks []struct {
		ID     string `json:"id"`
		Status struct {
			State     string `json:"state"`
			Timestamp string `json:"timestamp"`
		} `json:"status"`
	} `json:"tasks"`
	NextPageToken *string `json:"nextPageToken"`
	PageSize      *int    `json:"pageSize"`
	TotalSize     *int    `json:"totalSize"`
}

// ids lists the page's task ids in order.
func (p v1Page) ids() []string {
	out := make([]string, len(p.Tasks))
	for i, t := range p.Tasks {
		out[i] = t.ID
	}
	return out
}

// listV1 calls ListTasks and checks the shape every page has: a tasks array
// (never null) and all of nextPageToken, pageSize and totalSize.
func listV1(t *testing.T, s *service, params string) v1Page {
	t.Helper()
	var raw map[string]json.RawMessage
	if e := rpc(t, s, "1.0", "ListTasks", params, &raw); e != nil {
		t.Fatalf("ListTasks %s: %+v", params, e)
	}
	if string(raw["tasks"]) == "" || string(raw["tasks"]) == "null" {
		t.Fatalf("ListTasks %s: tasks is not an array: %s", params, raw["tasks"])
	}
	b, _ := json.Marshal(raw)
	var p v1Page
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("ListTasks %s: %v", params, err)
	}
	if p.NextPageToken == nil || p.PageSize == nil || p.TotalSize == nil {
		t.Fatalf("ListTasks %s: nextPageToken, pageSize and totalSize are all required: %s", params, b)
	}
	return p
}

// sendV1 starts a task with a 1.0 SendMessage that returns at once and
// returns its id.
func sendV1(t *testing.T, s *service, text, contextID string) string {
	t.Helper()
	var res struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	params := fmt.Sprintf(`{"message":{"messageId":"tck10-%d","role":"ROLE_USER","contextId":%q,"parts":[{"text":%q}]},"configuration":{"returnImmediately":true}}`, time.Now().UnixNano(), contextID, text)
	if e := rpc(t, s, "1.0", "SendMessage", params, &res); e != nil || res.Task.ID == "" {
		t.Fatalf("SendMessage: %+v %+v", res, e)
	}
	return res.Task.ID
}

// TestTCK10ListTasksPageSize: the TCK's test_list_tasks_empty_when_none_exist,
// test_default_page_size and test_last_page_detection want pageSize to be the
// number of tasks returned. a2a.proto says ListTasksResponse.page_size is "the
// page size used for this response", and the spec's own examples answer one
// task with "pageSize": 20: agentd answers the page size it used (the one
// asked for, else the default 50), as the spec says. The rest of those checks
// (an empty tasks array, totalSize, an empty nextPageToken on the last page)
// are kept as the TCK has them.
func TestTCK10ListTasksPageSize(t *testing.T) {
	s := startService(t, "--intelligence", "builtin:wait")

	empty := listV1(t, s, fmt.Sprintf(`{"contextId":"empty-test-%d"}`, time.Now().UnixNano()))
	if len(empty.Tasks) != 0 || *empty.TotalSize != 0 || *empty.NextPageToken != "" || *empty.PageSize != 50 {
		t.Fatalf("a context without tasks: %d tasks, totalSize %d, nextPageToken %q, pageSize %d; want none, 0, \"\" and the default page size 50",
			len(empty.Tasks), *empty.TotalSize, *empty.NextPageToken, *empty.PageSize)
	}

	ctx := fmt.Sprintf("last-page-test-%d", time.Now().UnixNano())
	var sent []string
	for i := 0; i < 3; i++ {
		sent = append(sent, sendV1(t, s, fmt.Sprintf("Task %d for last page test", i), ctx))
	}
	last := listV1(t, s, `{"contextId":"`+ctx+`","pageSize":10}`)
	if len(last.Tasks) != 3 || *last.TotalSize != 3 || *last.NextPageToken != "" || *last.PageSize != 10 {
		t.Fatalf("3 tasks, pageSize 10: %d tasks, totalSize %d, nextPageToken %q, pageSize %d; want 3, 3, \"\" and 10",
			len(last.Tasks), *last.TotalSize, *last.NextPageToken, *last.PageSize)
	}
	all := listV1(t, s, `{"contextId":"`+ctx+`"}`)
	if len(all.Tasks) != 3 || *all.TotalSize != 3 || *all.PageSize != 50 || *all.NextPageToken != "" {
		t.Fatalf("3 tasks, default page: %d tasks, totalSize %d, pageSize %d, nextPageToken %q; want 3, 3, 50, \"\"",
			len(all.Tasks), *all.TotalSize, *all.PageSize, *all.NextPageToken)
	}

	// Pages of 2: the first names a next page, the second is the last.
	first := listV1(t, s, `{"contextId":"`+ctx+`","pageSize":2}`)
	if len(first.Tasks) != 2 || *first.PageSize != 2 || *first.TotalSize != 3 || *first.NextPageToken == "" {
		t.Fatalf("first page of 2: %d tasks, pageSize %d, totalSize %d, nextPageToken %q", len(first.Tasks), *first.PageSize, *first.TotalSize, *first.NextPageToken)
	}
	second := listV1(t, s, `{"contextId":"`+ctx+`","pageSize":2,"pageToken":"`+*first.NextPageToken+`"}`)
	if len(second.Tasks) != 1 || *second.PageSize != 2 || *second.TotalSize != 3 || *second.NextPageToken != "" {
		t.Fatalf("second page of 2: %d tasks, pageSize %d, totalSize %d, nextPageToken %q", len(second.Tasks), *second.PageSize, *second.TotalSize, *second.NextPageToken)
	}
	got := append(first.ids(), second.ids()...)
	slices.Sort(got)
	slices.Sort(sent)
	if !slices.Equal(got, sent) {
		t.Fatalf("the two pages hold %v, want each task once: %v", got, sent)
	}

	// The bounds a2a.proto gives page_size: 1 to 100.
	for _, bad := range []string{`{"pageSize":0}`, `{"pageSize":101}`, `{"pageSize":-1}`} {
		if e := rpc(t, s, "1.0", "ListTasks", bad, nil); e == nil || e.Code != -32602 {
			t.Errorf("ListTasks %s: %+v, want -32602", bad, e)
		}
	}
}

// TestTCK10ListTasksOrder: the TCK's test_list_tasks_sorted_by_timestamp_descending
// creates three tasks and wants them listed newest created first. The spec
// (A2A 1.0 §3.1.4) orders by the status timestamp, "most recently updated
// tasks first"; the TCK's tasks keep running, and with a think time shorter
// than its test the first one finishes, last updated, and is rightly listed
// first. Here the order is forced the other way by cancelling the older task:
// it must come first, and the timestamps never increase down the list.
func TestTCK10ListTasksOrder(t *testing.T) {
	s := startService(t, "--intelligence", "builtin:wait")
	ctx := fmt.Sprintf("order-test-%d", time.Now().UnixNano())
	older := sendV1(t, s, "First task", ctx)
	newer := sendV1(t, s, "Second task", ctx)
	waitFor(t, 10*time.Second, "both tasks working", func() bool {
		p := listV1(t, s, `{"contextId":"`+ctx+`","status":"TASK_STATE_WORKING"}`)
		return len(p.Tasks) == 2
	})
	checkOrder := func(want ...string) {
		t.Helper()
		p := listV1(t, s, `{"contextId":"`+ctx+`"}`)
		if !slices.Equal(p.ids(), want) {
			t.Fatalf("listed %v, want %v (most recently updated first)", p.ids(), want)
		}
		var prev time.Time
		for i, task := range p.Tasks {
			ts, err := time.Parse(time.RFC3339Nano, task.Status.Timestamp)
			if err != nil {
				t.Fatalf("task %d: status timestamp %q: %v", i, task.Status.Timestamp, err)
			}
			if i > 0 && ts.After(prev) {
				t.Fatalf("task %d updated at %s, after task %d above it (%s)", i, ts, i-1, prev)
			}
			prev = ts
		}
	}
	checkOrder(newer, older)
	if e := rpc(t, s, "1.0", "CancelTask", `{"id":"`+older+`"}`, nil); e != nil {
		t.Fatalf("CancelTask: %+v", e)
	}
	checkOrder(older, newer)
	if e := rpc(t, s, "1.0", "CancelTask", `{"id":"`+newer+`"}`, nil); e != nil {
		t.Fatalf("CancelTask: %+v", e)
	}
	checkOrder(newer, older)
}

// TestTCK10AgentCardURLs: the TCK's test_sensitive_information_protection
// flags any "127.0.0.1" in the public card, including the card's own url,
// which the spec requires (the card names the endpoint it is served for; the
// TCK's source marks the check "FIXME allow localhost"). agentd advertises the
// address it listens on unless --public-url says where clients reach it; then
// every URL in the card is that one. The rest of the TCK's check, no
// credentials in the card, is kept: the static tokens agentd accepts appear
// nowhere in it.
func TestTCK10AgentCardURLs(t *testing.T) {
	s := startService(t)
	card := fetchCard(t, s.url)
	if card.URL != s.url+"/" {
		t.Fatalf("card url %q, want the address served, %q", card.URL, s.url+"/")
	}
	for i, in := range card.Interfaces {
		if in.URL != card.URL {
			t.Fatalf("supportedInterfaces[%d].url %q, want %q", i, in.URL, card.URL)
		}
	}

	const public = "https://agentd.example:8443/"
	secrets := []string{"tck10-peer-secret-7f3a9c", "tck10-operator-secret-b81e04"}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(secrets[0]+" peer alice\n"+secrets[1]+" operator ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startService(t, "--public-url", public, "--bearer-tokens-file", tokens)
	// The service's own url is the public one; the card is fetched where it
	// listens.
	card = fetchCard(t, "http://"+listenAddr(t, p))
	for _, secret := range secrets {
		if strings.Contains(string(card.raw), secret) {
			t.Fatalf("the public card holds a bearer token: %s", card.raw)
		}
	}
	if card.URL != public {
		t.Fatalf("card url %q with --public-url %s", card.URL, public)
	}
	if len(card.Interfaces) == 0 {
		t.Fatal("the card lists no supportedInterfaces")
	}
	for i, in := range card.Interfaces {
		if in.URL != public {
			t.Fatalf("supportedInterfaces[%d].url %q with --public-url %s", i, in.URL, public)
		}
	}
}

// v1Card is the part of the agent card the URL checks read.
type v1Card struct {
	URL        string `json:"url"`
	Interfaces []struct {
		URL             string `json:"url"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	raw []byte
}

func fetchCard(t *testing.T, base string) v1Card {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c v1Card
	if resp.StatusCode != 200 || json.Unmarshal(b, &c) != nil {
		t.Fatalf("card: %d %s", resp.StatusCode, b)
	}
	c.raw = b
	return c
}

// listenAddr is the address the service listens on, from its "serving" log
// line.
func listenAddr(t *testing.T, s *service) string {
	t.Helper()
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var rec struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
			return rec.Listen
		}
	}
	t.Fatalf("no serving line in the log:\n%s", s.logs.String())
	return ""
}
