package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every command's -h exits 0 and prints its usage line and flags; certs -h is
// the help of its only subcommand, init.
func TestHelpOfEveryCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"agentd serve", "agentd store", "Exit codes:", "143"}},
		{[]string{"serve", "-h"}, []string{"Usage: agentd serve [flags]", "-listen", "AGENT_LISTEN", "-bearer-tokens-file string",
			"-max-live-runs", "AGENT_MAX_LIVE_RUNS", "-max-live-subagents", "AGENT_MAX_LIVE_SUBAGENTS", "-queue-capacity", "-memory-limit", "-priority-caps",
			"-console", "AGENT_CONSOLE", "-log-format", "AGENT_LOG_FORMAT"}},
		{[]string{"run", "-h"}, []string{"Usage: agentd run [flags] [TEXT", "-instruction", "-mode", "AGENT_RUN_ID", "-log-format"}},
		{[]string{"send", "-h"}, []string{"Usage: agentd send [flags] TEXT", "-to", "-stream", "-timeout", "-progress", "AGENT_SEND_PROGRESS"}},
		{[]string{"ctl", "a2a.Tree", "-h"}, []string{"Usage: agentd ctl a2a.Tree [flags]", "-watch", "-json"}},
		{[]string{"ctl", "-h"}, []string{"a2a.Drain", "a2a.Caps", "a2a.CloseBreaker"}},
		{[]string{"ctl", "a2a.CloseBreaker", "-h"}, []string{"-key"}},
		{[]string{"ctl", "a2a.Caps", "-h"}, []string{"-max-live-runs", "-max-live-subagents", "-queue-capacity"}},
		{[]string{"ctl", "a2a.Cancel", "-h"}, []string{"Usage: agentd ctl a2a.Cancel [flags]", "-handle", "-json", "-timeout"}},
		{[]string{"store", "-h"}, []string{"Usage: agentd store inspect|prune", "prune"}},
		{[]string{"store", "inspect", "-h"}, []string{"Usage: agentd store inspect [flags]", "-state-dir", "-task", "-json"}},
		{[]string{"store", "prune", "-h"}, []string{"Usage: agentd store prune [flags]", "-older-than"}},
		{[]string{"certs", "-h"}, []string{"Usage: agentd certs init [flags]", "-trust-domain", "-dir", "-validity", "-force"}},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out, &out)
		if code := exitCode(err, &out); code != 0 {
			t.Errorf("%v: exit %d\n%s", tc.args, code, out.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q\n%s", tc.args, w, out.String())
			}
		}
	}
}
