// Command floor is the spawn benchmark's floor: the smallest static Go program
// that speaks agentd's child handshake. It arms PR_SET_PDEATHSIG and checks its
// parent as agentd's child does, sends ctrl/ready, reads the spawn frame
// (without decoding it), sends one loop/event and a completed result, and
// exits 0. The supervisor re-execs it as Config.Executable; `make bench`
// builds it with CGO_ENABLED=0.
//
// It imports only os, io, strconv, encoding/binary and syscall, so its package
// init is a few microseconds: what is left is the cost of fork, exec and the Go
// runtime's start.
package main

import (
	"encoding/binary"
	"io"
	"os"
	"strconv"
	"syscall"
)

func main() {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		os.Exit(1)
	}
	if os.Getenv("AGENT_SUPERVISOR_PID") != strconv.Itoa(os.Getppid()) {
		os.Exit(137) // the supervisor died between fork and prctl
	}
	send(`{"jsonrpc":"2.0","method":"ctrl/ready","params":{"pid":` + strconv.Itoa(os.Getpid()) + `}}`)
	var hdr [4]byte
	if _, err := io.ReadFull(os.Stdin, hdr[:]); err != nil {
		os.Exit(1)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(os.Stdin, body); err != nil {
		os.Exit(1)
	}
	send(`{"jsonrpc":"2.0","method":"loop/event","params":{"step":1,"kind":"model","usage_delta":{"tokens_in":1,"tokens_out":1,"steps":1}}}`)
	send(`{"jsonrpc":"2.0","method":"result","params":{"status":"completed","distillate":{"kind":"inline","value":"floor"},"usage":{"tokens_in":1,"tokens_out":1,"steps":1}}}`)
}

// send writes one length-prefixed frame to control-out in a single write.
func send(body string) {
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	if _, err := os.Stdout.Write(buf); err != nil {
		os.Exit(1)
	}
}
