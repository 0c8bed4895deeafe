package api

import (
	"strings"
	"testing"
	"time"
)

func TestParseBlobURI(t *testing.T) {
	for _, tc := range []struct {
		uri string
		id  string
		ok  bool
	}{
		{"agent://blob/01a2-b_C", "01a2-b_C", true},
		{BlobURI("x"), "x", true},
		{"agent://blob/", "", false},
		{"agent://blob/a/b", "", false},
		{"agent://blob/../x", "", false},
		{"agent://subagent/x", "", false},
		{"http://host/blobs/x", "", false},
		{"agent://blob/" + strings.Repeat("a", 65), "", false},
	} {
		id, ok := ParseBlobURI(tc.uri)
		if ok != tc.ok || (ok && id != tc.id) {
			t.Errorf("ParseBlobURI(%q) = %q, %v; want %q, %v", tc.uri, id, ok, tc.id, tc.ok)
		}
	}
}

// FuzzParseBlobURI checks that an accepted uri round-trips and that an
// accepted id never carries a path separator or dot segment.
func FuzzParseBlobURI(f *testing.F) {
	f.Add("agent://blob/abc")
	f.Add("agent://blob/")
	f.Add("agent://blob/../../etc/passwd")
	f.Fuzz(func(t *testing.T, uri string) {
		id, ok := ParseBlobURI(uri)
		if !ok {
			return
		}
		if BlobURI(id) != uri || strings.ContainsAny(id, "/.%?#") || id == "" {
			t.Fatalf("accepted %q as id %q", uri, id)
		}
	})
}

func TestLimitsAndIntelligenceDefaults(t *testing.T) {
	var l Limits
	if l.Repeats() != DefaultMaxRepeats || l.Budget() != DefaultDistillateBudget {
		t.Fatalf("zero limits: repeats %d budget %d", l.Repeats(), l.Budget())
	}
	l = Limits{MaxSteps: 1, MaxTokens: 1, Deadline: Duration(time.Second), MaxRepeats: 5, DistillateBudget: 100}
	if err := l.Validate(); err != nil || l.Repeats() != 5 || l.Budget() != 100 {
		t.Fatalf("set limits: %v %d %d", err, l.Repeats(), l.Budget())
	}
	for _, bad := range []Limits{
		{MaxSteps: 1, MaxTokens: 1, Deadline: Duration(time.Second), MaxRepeats: 1},
		{MaxSteps: 1, MaxTokens: 1, Deadline: Duration(time.Second), MaxRepeats: -2},
		{MaxSteps: 1, MaxTokens: 1, Deadline: Duration(time.Second), DistillateBudget: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}

	var in Intelligence
	if in.Timeout() != DefaultRequestTimeout || in.RetryCount() != DefaultRetries || in.Backoff() != DefaultRetryBackoff {
		t.Fatalf("zero intelligence: %s %d %s", in.Timeout(), in.RetryCount(), in.Backoff())
	}
	zero := 0
	in = Intelligence{Endpoint: "http://x", RequestTimeout: Duration(time.Second), Retries: &zero, RetryBackoff: Duration(time.Millisecond)}
	if in.Validate() != nil || in.Timeout() != time.Second || in.RetryCount() != 0 || in.Backoff() != time.Millisecond {
		t.Fatalf("set intelligence: %+v", in)
	}
	neg := -1
	for _, bad := range []Intelligence{
		{},
		{Endpoint: "x", RequestTimeout: -1},
		{Endpoint: "x", Retries: &neg},
		{Endpoint: "x", RetryBackoff: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
