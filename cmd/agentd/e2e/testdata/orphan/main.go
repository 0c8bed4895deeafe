// Command orphan is the image test's helper (image_test.go), run in the
// agentd container with podman exec, which starts it in the container's PID
// namespace with a parent outside it:
//
//	orphan spawn       start a copy of itself that waits for SIGTERM, print
//	                   its pid, and exit at once: the copy is orphaned, and
//	                   reparents to the namespace's PID 1 (agentd)
//	orphan stat PID    print "ppid N state S" from /proc/PID/stat, or "gone"
//	orphan kill PID    send PID SIGTERM
//	orphan certs       print how many certificates the CA bundle at
//	                   /etc/ssl/certs/ca-certificates.crt holds, after Go's
//	                   system pool has loaded (it fails when it cannot)
//
// It is built static (CGO_ENABLED=0): the image has no libc.
package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "orphan:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: orphan spawn|wait|stat PID|kill PID|certs")
	}
	pid := 0
	if len(args) > 1 {
		var err error
		if pid, err = strconv.Atoi(args[1]); err != nil {
			return err
		}
	}
	switch args[0] {
	case "spawn":
		cmd := exec.Command("/proc/self/exe", "wait") // no stdio: podman exec ends when this process does
		if err := cmd.Start(); err != nil {
			return err
		}
		fmt.Println(cmd.Process.Pid)
		return nil // not waited: orphaned
	case "wait":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		<-c
		return nil
	case "stat":
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if os.IsNotExist(err) {
			fmt.Println("gone")
			return nil
		}
		if err != nil {
			return err
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after
		// its closing parenthesis.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		fmt.Printf("ppid %s state %s\n", f[1], f[0])
		return nil
	case "kill":
		return syscall.Kill(pid, syscall.SIGTERM)
	case "certs":
		if _, err := x509.SystemCertPool(); err != nil {
			return err
		}
		b, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		if err != nil {
			return err
		}
		n := 0
		for {
			var blk *pem.Block
			if blk, b = pem.Decode(b); blk == nil {
				break
			}
			if _, err := x509.ParseCertificate(blk.Bytes); err == nil {
				n++
			}
		}
		fmt.Println(n)
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}
