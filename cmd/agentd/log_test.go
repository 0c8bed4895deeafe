package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
)

// TestLogFormat: JSON when the log is not a terminal, text on one, and
// --log-format decides over both.
func TestLogFormat(t *testing.T) {
	pty, tty := clitest.OpenPTY(t)
	for _, c := range []struct {
		format string
		tty    bool
		json   bool
	}{
		{"", false, true},
		{"", true, false},
		{logJSON, true, true},
		{logText, false, false},
	} {
		core := &coreConfig{LogLevel: "info", LogFormat: c.format}
		var line string
		if c.tty {
			core.logger(tty).Info("serving", "listen", "127.0.0.1:8080")
			buf := make([]byte, 4096)
			pty.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := pty.Read(buf)
			if err != nil {
				t.Fatalf("read the pty: %v", err)
			}
			line = string(buf[:n])
		} else {
			var b bytes.Buffer
			core.logger(&b).Info("serving", "listen", "127.0.0.1:8080")
			line = b.String()
		}
		var rec map[string]any
		isJSON := json.Unmarshal([]byte(line), &rec) == nil
		if isJSON != c.json {
			t.Errorf("format %q on a terminal %v: %q, want JSON %v", c.format, c.tty, line, c.json)
		}
		if !c.json && (!strings.Contains(line, "msg=serving") || !strings.Contains(line, "listen=127.0.0.1:8080") ||
			!strings.HasPrefix(line, "time=") || len(strings.SplitN(line, " ", 2)[0]) != len("time=15:04:05.000")) {
			t.Errorf("text line %q", line)
		}
	}
}
