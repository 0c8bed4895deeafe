// Package cli is what agentd's commands share on the command line: the flags
// that default from their environment variables and explain a mistyped flag
// in a few lines, the exit error that carries a code out of a command, and
// whether a stream is a terminal. The service's commands (package main) and
// the client commands (package client) both use it.
package cli
