package cli_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
)

func TestIsTerminal(t *testing.T) {
	_, tty := clitest.OpenPTY(t)
	if !cli.IsTerminal(tty) {
		t.Error("a pty is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cli.IsTerminal(f) || cli.IsTerminal(&bytes.Buffer{}) {
		t.Error("a file or a buffer is a terminal")
	}
}
