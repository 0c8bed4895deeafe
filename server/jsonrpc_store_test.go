package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/a2a/tasks"
)

// TestStoreUnavailableCarriesARetryHint pins the answer to a request the
// store could not serve: -32000, the store's unavailability and a retry hint
// in the message and in the data, for 0.3 and 1.0 alike.
func TestStoreUnavailableCarriesARetryHint(t *testing.T) {
	err := fmt.Errorf("get task t1: %w", tasks.ErrStoreUnavailable)
	e := toRPCError(err)
	if e.Code != CodeServerError {
		t.Fatalf("code %d, want %d", e.Code, CodeServerError)
	}
	if !strings.Contains(e.Message, "unavailable") || !strings.Contains(e.Message, fmt.Sprintf("retry after %ds", StoreRetryAfter)) {
		t.Fatalf("message %q names neither the store's unavailability nor the retry hint", e.Message)
	}
	data, _ := e.Data.(map[string]any)
	if data["retryAfterSeconds"] != StoreRetryAfter {
		t.Fatalf("data %v: no retryAfterSeconds %d", e.Data, StoreRetryAfter)
	}
	if e.retryAfter != 0 {
		t.Fatalf("a store outage is not shedding: retryAfter %d would make it HTTP 429", e.retryAfter)
	}
	v1 := toV1Error(err)
	if v1.Code != CodeServerError || !strings.Contains(v1.Message, "retry after") {
		t.Fatalf("1.0 answer %+v lost the hint", v1)
	}
}
