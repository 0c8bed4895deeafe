package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// exitCode is the process's exit code for err (from run), which it prints.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(stderr, "agentd:", ee.Err)
		}
		return ee.Code
	}
	if errors.Is(err, sqlite.ErrStateDir) {
		// The state directory cannot be used (a database whose pages are
		// damaged, met after it opened): bad config, as at its opening.
		fmt.Fprintln(stderr, "agentd: --state-dir:", err)
		return api.ExitUsage
	}
	fmt.Fprintln(stderr, "agentd:", err)
	return api.ExitFailure
}
