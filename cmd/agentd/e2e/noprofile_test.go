package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The service samples no heap profile (internal/noprofile; issue 35): its
// profiling buckets do not grow while it serves, where under the runtime's
// default rate (a sample per 512 KiB allocated) each new allocation stack
// sampled added a bucket, and each bucket's hash slot a resident page. The
// rate is set to 0 at init, which records one last sample on each P as it
// next allocates: the service runs on one P (GOMAXPROCS=1), whose last
// sample the first requests take, and from then on about 30 MiB of requests
// (runs of 1 MiB messages, each decoded, stored and sent to its child, and
// lookups of 1 MiB refused) add no bucket.
func TestServeSamplesNoHeapProfile(t *testing.T) {
	t.Parallel()
	a := startServiceAs(t, agentdBin, []string{"GOMAXPROCS=1"}, "--metrics-addr", "127.0.0.1:0", "--intelligence", "builtin:wait", "--max-live-runs", "16")
	url := a.metricsURL(t)
	const series = "go_memstats_buck_hash_sys_bytes"
	pad := strings.Repeat("x", 1<<20)
	post := func(body, want string) {
		t.Helper()
		resp, err := http.Post(a.url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte(want)) {
			t.Fatalf("%.80s...: %.300s", body, b)
		}
	}
	get := func(i int) {
		post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"id":"none-%d","metadata":{"pad":%q}}}`, i, i, pad), `"error"`)
	}
	for i := range 8 {
		get(i)
	}
	before, ok := scrape(t, url)[series]
	if !ok {
		t.Fatalf("no %s in /metrics", series)
	}
	for i := range 10 {
		post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"np-%d","role":"user","parts":[{"kind":"text","text":%q}]}}}`, i, i, pad), `"state":"`)
		get(100 + i)
	}
	if after := scrape(t, url)[series]; after != before {
		t.Errorf("%s %v after 30 MiB of requests, %v before: the service samples heap allocations", series, after, before)
	}
}
