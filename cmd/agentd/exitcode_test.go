package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

// A bad address or URL is bad config: exit 2 naming the setting, before
// anything starts (it was exit 1 from the listen or the request, not naming
// the flag).
func TestBadAddressIsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:99999"}, "--listen"},
		{[]string{"serve", "--health-listen", "127.0.0.1:-1"}, "--health-listen"},
		{[]string{"serve", "--metrics-addr", "127.0.0.1:70000"}, "--metrics-addr"},
		{[]string{"send", "--to", "127.0.0.1:8080", "hi"}, "--to"},
		{[]string{"send", "--to", "localhost:8080", "hi"}, "--to"},
		{[]string{"ctl", "a2a.Tree", "--to", "127.0.0.1:8080"}, "--to"},
		{[]string{"ctl", "a2a.Tree", "--to", "ftp://127.0.0.1:8080/"}, "--to"},
	} {
		var stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stderr, &stderr), &stderr)
		if code != api.ExitUsage || !strings.Contains(stderr.String(), tc.flag) {
			t.Errorf("%v: exit %d\n%s", tc.args, code, stderr.String())
		}
	}
}
