package testkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a
// server that must be told its port before it binds it: PostgreSQL, mock-llm
// (PORT), an agentd whose peer needs its URL first. A port found by binding
// port 0 and closing it is the kernel's next ephemeral port, which any other
// listener of the tests (they all bind port 0) could be given before the
// server binds it, or while it restarts on it: one fresh `make test` saw a
// test's fake model take mock-llm's port that way. So it picks a port below
// the kernel's ephemeral range (ip_local_port_range), from which no bind to
// port 0 is ever served, checks that it can be bound now, and never returns
// the same port twice in a process. Two test processes picking the same port
// at once (about one chance in 20000 a pair) is what is left; a caller that
// can tries again on another port.
func FreePort() (int, error) {
	low := ephemeralLow()
	if low <= freePortFloor+1000 {
		return anyPort() // no room below the ephemeral range
	}
	freePorts.mu.Lock()
	defer freePorts.mu.Unlock()
	if freePorts.given == nil {
		freePorts.given = map[int]bool{}
	}
	for range 200 {
		p := freePortFloor + rand.IntN(low-freePortFloor)
		if freePorts.given[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use
		}
		ln.Close()
		freePorts.given[p] = true
		return p, nil
	}
	return 0, errors.New("testkit: no free port below the ephemeral range")
}

// freePortFloor is the lowest port FreePort returns: above the well-known and
// the commonly configured ones (8080, 9090).
const freePortFloor = 10000

var freePorts struct {
	mu    sync.Mutex
	given map[int]bool
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// anyPort is a port the kernel found free, by binding port 0.
func anyPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testkit: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
