// Command agentd is an A2A mesh service that runs each piece of work as a tree
// of supervised subagents. Run `agentd --help` for the commands; the design is
// in docs/ARCHITECTURE.md.
//
// main dispatches the subagent mode first (the supervisor re-execs this binary
// with AGENT_SUBAGENT set), then runs one command of the map in main.go, each
// in the file named after it (serve.go, run.go, store.go, certs.go; send and
// ctl are package client, and the flags and exit errors every command shares
// are package internal/cli). Each command goes config -> build -> run:
//
//   - config: a plain struct (serveConfig, runConfig, sendConfig, ctlConfig,
//     certsConfig; coreConfig is what serve and run share) filled by the
//     command's flag.FlagSet, each flag defaulting from its environment
//     variable. Its Validate is pure: it reads no file, opens nothing, and
//     every error names its setting (exit 2).
//   - build: buildService and buildOnce open what the config names (the
//     tracer provider, the identity source, the key, token and script files,
//     the MCP sessions, the supervisor, the listeners) and return a program;
//     an error keeps the exit-code table's code (bad config 2, a required MCP
//     server down 6).
//   - run: program.Run serves or runs until it ends or the first signal, then
//     drains, then closes what the build opened in reverse order.
//
// runUnderSignals (lifecycle.go) is the one owner of the two-signal policy of
// serve and run: the first SIGTERM or SIGINT drains, the second SIGKILLs every
// process group.
package main
