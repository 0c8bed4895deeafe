package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// serveLimited serves h within l on a loopback listener and returns its
// address and the listener.
func serveLimited(t *testing.T, l ConnLimits, h http.Handler) (string, *LimitedListener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := l.Listener(ln, nil)
	srv := l.Server(h, nil)
	go srv.Serve(ll)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), ll
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body); w.Write([]byte("ok")) })

// roundTrip sends one keep-alive GET on c and reads the answer.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
}

// closedByPeer reports whether the server closed c (a read sees EOF or a
// reset) within wait.
func closedByPeer(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The N+1st connection from one address is closed at once; the first N are
// served, and a slot given back is taken again.
func TestPerAddressCap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits ConnLimits
	}{
		{"per address", ConnLimits{MaxConns: 100, MaxConnsPerAddr: 3}},
		{"in all", ConnLimits{MaxConns: 3, MaxConnsPerAddr: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, ll := serveLimited(t, tc.limits, okHandler)
			var held []net.Conn
			for range 3 {
				c := dial(t, addr)
				roundTrip(t, c, bufio.NewReader(c))
				held = append(held, c)
			}
			extra := dial(t, addr)
			if !closedByPeer(extra, 5*time.Second) {
				t.Fatal("the 4th connection was not closed")
			}
			if ll.Refused() != 1 || ll.Open() != 3 {
				t.Fatalf("refused %d, open %d", ll.Refused(), ll.Open())
			}
			for _, c := range held {
				roundTrip(t, c, bufio.NewReader(c)) // still served
			}
			held[0].Close()
			testkit.WaitFor(t, 5*time.Second, "the closed connection's slot given back", func() bool { return ll.Open() == 2 })
			again := dial(t, addr)
			roundTrip(t, again, bufio.NewReader(again))
		})
	}
}

// An idle keep-alive connection is closed after IdleTimeout.
func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	addr, _ := serveLimited(t, ConnLimits{IdleTimeout: idle}, okHandler)
	c := dial(t, addr)
	roundTrip(t, c, bufio.NewReader(c))
	start := time.Now()
	if !closedByPeer(c, 5*time.Second) {
		t.Fatal("the idle connection is still open after 5s")
	}
	if el := time.Since(start); el < idle/2 {
		t.Fatalf("closed after %s, before the idle timeout", el)
	}
}

// A body trickled slower than its deadline is cut at the deadline: 408 and
// the connection closed, on the JSON-RPC endpoint and elsewhere.
func TestTrickledBodyCut(t *testing.T) {
	const body = 300 * time.Millisecond
	h := Handler(Config{})
	addr, _ := serveLimited(t, ConnLimits{BodyTimeout: body}, h)
	for _, path := range []string{"/", "/healthz"} {
		c := dial(t, addr)
		method := "POST"
		if path != "/" {
			method = "GET"
		}
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", method, path)
		start := time.Now()
		stop := make(chan struct{})
		go func() { // one byte every 50ms: the 1000 would take 50s
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		if path == "/" {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("%s: HTTP %d, close %v", path, resp.StatusCode, resp.Close)
			}
			io.Copy(io.Discard, resp.Body)
		} else if resp, err := http.ReadResponse(br, nil); err == nil {
			io.Copy(io.Discard, resp.Body) // answered; the unread body is still cut
		}
		_, err := io.Copy(io.Discard, br)
		close(stop)
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("%s: the connection was not closed: %v", path, err)
		}
		if el := time.Since(start); el > body+3*time.Second {
			t.Fatalf("%s: cut after %s", path, el)
		}
	}
}

// Once the body is in, the body deadline no longer applies: a handler that
// answers after it sees its request's context still alive.
func TestBodyDeadlineLifted(t *testing.T) {
	const body = 100 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		bodyRead(w)
		timer := time.NewTimer(3 * body)
		defer timer.Stop()
		select {
		case <-timer.C:
			w.Write([]byte("alive"))
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})
	addr, _ := serveLimited(t, ConnLimits{BodyTimeout: body}, h)
	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "alive" {
		t.Fatalf("HTTP %d %q: the request's context ended at the body deadline", resp.StatusCode, b)
	}
}

func TestConnLimitsValidate(t *testing.T) {
	for _, l := range []ConnLimits{{MaxConns: -1}, {MaxConns: 4, MaxConnsPerAddr: 5}, {IdleTimeout: -time.Second}} {
		if l.Validate() == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if err := (ConnLimits{}).Validate(); err != nil {
		t.Fatal(err)
	}
}
