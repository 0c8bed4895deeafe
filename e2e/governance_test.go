package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// procStatus reads a field of /proc/PID/status in kB (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// postJSON posts body to url as JSON-RPC (Content-Type application/json).
func postJSON(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The hoard of issue 15: 80 blocking messages of 3 MB each (4 at a time).
// Every finished task keeps its history and its distillate; without byte
// budgets the supervisor's RSS grew from 24 to 847 MiB (measured on the
// binary before the budgets). With a 16 MiB task store and a 16 MiB blob
// store (the quota of the one caller raised to the whole task store, so all
// four run at once) its peak RSS (VmHWM) stays under 256 MiB: what the stores
// hold (twice, for Go's heap growth), four requests in flight (each body,
// its decoded message, the child's payload frame and result frame) and the
// runtime; measured 26 MiB before, 173 MiB at the peak.
func TestMemoryHoard(t *testing.T) {
	const (
		messages    = 80
		concurrency = 4
		size        = 3_000_000
		budgetKiB   = 256 << 10
	)
	// builtin:demo answers with the message quoted: 3 MB in, 3 MB out, which
	// it counts as 1.5M tokens; the payload write gets the default 2s.
	s := startService(t, "--task-store-bytes", "16MiB", "--task-quota-bytes", "16MiB", "--blob-store-bytes", "16MiB",
		"--max-tokens", "100000000", "--tree-token-ceiling", "100000000", "--kill-grace", "2s")
	pid := s.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")
	text := strings.Repeat("word ", size/5)
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, messages)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "method": "message/send", "params": sendParams(text, true)})
				resp, err := http.Post(s.url+"/", "application/json", bytes.NewReader(b))
				if err != nil {
					errs <- err
					continue
				}
				var r struct {
					Result struct {
						Status struct {
							State string `json:"state"`
						} `json:"status"`
					} `json:"result"`
					Error any `json:"error"`
				}
				err = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if err != nil || r.Error != nil || r.Result.Status.State != "completed" {
					errs <- fmt.Errorf("message %d: %v %v state %q", i, err, r.Error, r.Result.Status.State)
				}
			}
		}()
	}
	for i := range messages {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	peak, after := procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS")
	t.Logf("supervisor RSS: %d MiB before, %d MiB after, peak %d MiB (budget %d MiB)", before>>10, after>>10, peak>>10, budgetKiB>>10)
	if peak > budgetKiB {
		t.Fatalf("peak RSS %d MiB is over the %d MiB budget", peak>>10, budgetKiB>>10)
	}
}
