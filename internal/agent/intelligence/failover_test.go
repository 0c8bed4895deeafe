package intelligence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// The failover model against real HTTP servers on 127.0.0.1: the first
// endpoint fails in each way an endpoint fails, the call lands on the
// second; the breaker opens, half-opens and closes on a clock the test
// moves.

// okBody is a completion whose content is text.
func okBody(text string) string {
	return `{"choices":[{"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
}

// server is a scripted endpoint: it counts requests and answers each with
// handle.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, handle http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		handle(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) endpoint() string { return s.URL + "/v1" }

func answerWith(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// reports collects what a failover model reports.
type reports struct {
	mu  sync.Mutex
	all []api.IntelligenceReport
}

func (r *reports) add(x api.IntelligenceReport) {
	r.mu.Lock()
	r.all = append(r.all, x)
	r.mu.Unlock()
}

func (r *reports) outcomes(endpoint string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.all {
		if x.Endpoint == endpoint && x.Outcome != "" {
			out = append(out, x.Outcome)
		}
	}
	return out
}

func (r *reports) failovers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.all {
		if x.FailoverTo != nil {
			n++
		}
	}
	return n
}

func (r *reports) breakers(endpoint string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.all {
		if x.Endpoint == endpoint && x.Breaker != nil {
			out = append(out, x.Breaker.State)
		}
	}
	return out
}

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func twoEndpoints(first, second string, policy api.BreakerPolicy) api.Intelligence {
	return api.Intelligence{
		Endpoint: first, Model: "primary", Retries: intPtr(0), RequestTimeout: api.Duration(200 * time.Millisecond),
		Breaker:   policy,
		Fallbacks: []api.Intelligence{{Endpoint: second, Model: "backup", Retries: intPtr(0)}},
	}
}

func newTestFailover(t *testing.T, spec api.Intelligence, now func() time.Time) (*failoverModel, *reports) {
	t.Helper()
	if now == nil {
		now = time.Now
	}
	m, err := newFailover(spec, "", now)
	if err != nil {
		t.Fatal(err)
	}
	r := &reports{}
	m.SetReporter(r.add)
	return m, r
}

func ask(m Model) (*Response, error) {
	return m.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1"
}

// hangingServer accepts connections and never answers.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// cutServer answers 200 with half a completion and closes the connection.
func cutServer(t *testing.T) string {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "500")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assist`))
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
	})
	return s.endpoint()
}

// TestFailoverLandsOnTheSecond: whatever way the first endpoint fails, the
// call is answered by the second, the failure is reported with its outcome
// and the failover is reported.
func TestFailoverLandsOnTheSecond(t *testing.T) {
	for _, tc := range []struct {
		name    string
		first   func(t *testing.T) string
		outcome string
	}{
		{"5xx", func(t *testing.T) string {
			return newServer(t, answerWith(503, `{"error":{"message":"overloaded"}}`)).endpoint()
		}, api.CallServerError},
		{"429 with Retry-After", func(t *testing.T) string {
			return newServer(t, answerWith(429, `{"error":{"message":"slow down"}}`, "Retry-After", "1")).endpoint()
		}, api.CallRateLimited},
		{"connection refused", closedPort, api.CallUnreachable},
		{"hang past the timeout", hangingServer, api.CallTimeout},
		{"garbage", func(t *testing.T) string {
			return newServer(t, answerWith(200, `<html>not json`)).endpoint()
		}, api.CallBadAnswer},
		{"no choices", func(t *testing.T) string { return newServer(t, answerWith(200, `{"object":"list"}`)).endpoint() }, api.CallBadAnswer},
		{"cut mid-way", cutServer, api.CallBadAnswer},
		{"401", func(t *testing.T) string {
			return newServer(t, answerWith(401, `{"error":{"message":"bad key"}}`)).endpoint()
		}, api.CallClientError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := newServer(t, answerWith(200, okBody("from the second")))
			first := tc.first(t)
			m, r := newTestFailover(t, twoEndpoints(first, second.endpoint(), api.BreakerPolicy{}), nil)
			resp, err := ask(m)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "from the second" {
				t.Fatalf("content %q", resp.Content)
			}
			if got := r.outcomes(first); len(got) != 1 || got[0] != tc.outcome {
				t.Errorf("first endpoint's outcomes %v, want [%s]", got, tc.outcome)
			}
			if got := r.outcomes(second.endpoint()); len(got) != 1 || got[0] != api.CallOK {
				t.Errorf("second endpoint's outcomes %v, want [ok]", got)
			}
			if r.failovers() != 1 {
				t.Errorf("%d failovers reported, want 1", r.failovers())
			}
		})
	}
}

// TestBreakerOpensHalfOpensCloses: after Failures failed calls in a row the
// first endpoint's breaker opens and calls go straight to the second; after
// the cool-down one trial call goes to the first: a failed trial re-opens
// the breaker, a good one closes it.
func TestBreakerOpensHalfOpensCloses(t *testing.T) {
	var healthy atomic.Bool
	first := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if healthy.Load() {
			answerWith(200, okBody("from the first"))(w, r)
			return
		}
		answerWith(500, `{"error":{"message":"down"}}`)(w, r)
	})
	second := newServer(t, answerWith(200, okBody("from the second")))
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cool := 50 * time.Millisecond
	m, r := newTestFailover(t, twoEndpoints(first.endpoint(), second.endpoint(), api.BreakerPolicy{Failures: 3, CoolDown: api.Duration(cool)}), clk.now)
	for i := range 3 {
		if _, err := ask(m); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := r.breakers(first.endpoint()); len(got) != 1 || got[0] != api.BreakerOpen {
		t.Fatalf("breaker changes %v after 3 failures, want [open]", got)
	}
	if st := m.Breakers()[0]; st.State != api.BreakerOpen || !st.Until.Equal(clk.now().Add(cool)) {
		t.Fatalf("breaker %+v, want open until the cool-down's end", st)
	}
	for range 5 {
		if resp, err := ask(m); err != nil || resp.Content != "from the second" {
			t.Fatalf("while open: %v, %v", resp, err)
		}
	}
	if n := first.hits.Load(); n != 3 {
		t.Fatalf("the first endpoint got %d requests while its breaker was open, want 3 in all", n)
	}
	clk.add(cool)
	// The trial fails: open again, for another cool-down.
	if _, err := ask(m); err != nil {
		t.Fatal(err)
	}
	if n := first.hits.Load(); n != 4 {
		t.Fatalf("the first endpoint got %d requests, want 4 (the trial)", n)
	}
	if got := r.breakers(first.endpoint()); strings.Join(got, ",") != "open,half-open,open" {
		t.Fatalf("breaker changes %v, want open, half-open, open", got)
	}
	clk.add(cool)
	healthy.Store(true)
	resp, err := ask(m)
	if err != nil || resp.Content != "from the first" {
		t.Fatalf("the trial: %v, %v", resp, err)
	}
	if got := r.breakers(first.endpoint()); strings.Join(got, ",") != "open,half-open,open,half-open,closed" {
		t.Fatalf("breaker changes %v, want ... half-open, closed", got)
	}
	if st := m.Breakers()[0]; st.State != api.BreakerClosed || st.Failures != 0 {
		t.Fatalf("breaker %+v, want closed", st)
	}
}

// TestBreakerHonoursRetryAfter: an endpoint that answers 429 with a
// Retry-After (in seconds, or as an HTTP date) longer than the cool-down
// keeps its breaker open that long.
func TestBreakerHonoursRetryAfter(t *testing.T) {
	clk := &clock{t: time.Now()}
	for _, tc := range []struct {
		name, value string
		want        time.Duration
	}{
		{"seconds", "120", 120 * time.Second},
		{"HTTP date", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := newServer(t, answerWith(429, `{}`, "Retry-After", tc.value))
			second := newServer(t, answerWith(200, okBody("ok")))
			m, _ := newTestFailover(t, twoEndpoints(first.endpoint(), second.endpoint(), api.BreakerPolicy{Failures: 1, CoolDown: api.Duration(time.Millisecond)}), clk.now)
			if _, err := ask(m); err != nil {
				t.Fatal(err)
			}
			st := m.Breakers()[0]
			if got := st.Until.Sub(clk.now()); st.State != api.BreakerOpen || got < tc.want-2*time.Second || got > tc.want+time.Second {
				t.Fatalf("breaker %+v: open for %s, want about %s", st, got, tc.want)
			}
		})
	}
}

// TestBreakersFromThePayload: a child handed an open breaker (another
// child found the endpoint dead) never calls that endpoint until the
// breaker half-opens.
func TestBreakersFromThePayload(t *testing.T) {
	first := newServer(t, answerWith(200, okBody("from the first")))
	second := newServer(t, answerWith(200, okBody("from the second")))
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	spec := twoEndpoints(first.endpoint(), second.endpoint(), api.BreakerPolicy{})
	spec.Breakers = []api.EndpointBreaker{{Endpoint: first.endpoint(), Model: "primary", State: api.BreakerOpen, Since: clk.now(), Until: clk.now().Add(time.Second), Failures: 3}}
	m, r := newTestFailover(t, spec, clk.now)
	if resp, err := ask(m); err != nil || resp.Content != "from the second" {
		t.Fatalf("%v, %v", resp, err)
	}
	if first.hits.Load() != 0 || r.failovers() != 1 {
		t.Fatalf("first endpoint hit %d times, %d failovers; want 0 and 1", first.hits.Load(), r.failovers())
	}
	clk.add(time.Second)
	if resp, err := ask(m); err != nil || resp.Content != "from the first" {
		t.Fatalf("after the cool-down: %v, %v", resp, err)
	}
}

// TestAllDownIsUnreachable: when every endpoint fails as an outage would,
// or every breaker is open, the error wraps ErrUnreachable and names each
// endpoint; a client error (a bad key) on one is not an outage.
func TestAllDownIsUnreachable(t *testing.T) {
	clk := &clock{t: time.Now()}
	a, b := closedPort(t), newServer(t, answerWith(502, `bad gateway`)).endpoint()
	m, _ := newTestFailover(t, twoEndpoints(a, b, api.BreakerPolicy{Failures: 1}), clk.now)
	_, err := ask(m)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Fatalf("err = %v; want ErrUnreachable naming both endpoints", err)
	}
	_, err = ask(m)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "breaker open") {
		t.Fatalf("err = %v; want ErrUnreachable, every breaker open", err)
	}
	c := newServer(t, answerWith(401, `{"error":{"message":"bad key"}}`)).endpoint()
	m, _ = newTestFailover(t, twoEndpoints(closedPort(t), c, api.BreakerPolicy{}), clk.now)
	if _, err := ask(m); err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "bad key") {
		t.Fatalf("err = %v; want a plain error naming the 401", err)
	}
}

// TestOneEndpointKeepsItsError: with no fallback the endpoint's own error is
// returned as it was before failover existed.
func TestOneEndpointKeepsItsError(t *testing.T) {
	s := newServer(t, answerWith(500, `{"error":{"message":"boom"}}`))
	m, err := New(api.Intelligence{Endpoint: s.endpoint(), Model: "m", Retries: intPtr(0)}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ask(m)
	if err == nil || err.Error() != "intelligence answered 500 Internal Server Error: boom" {
		t.Fatalf("err = %v", err)
	}
}

// TestRetryBackoffJitter: a retry's wait is the doubling backoff plus up to
// a quarter of it at random, within the cap; a Retry-After is honoured as
// given.
func TestRetryBackoffJitter(t *testing.T) {
	m := &openAIModel{backoff: 100 * time.Millisecond}
	for _, tc := range []struct {
		r       float64
		attempt int
		want    time.Duration
	}{
		{0, 0, 100 * time.Millisecond},
		{0.5, 0, 112500 * time.Microsecond},
		{0.999, 1, 200*time.Millisecond + time.Duration(0.999*float64(50*time.Millisecond))},
		{0.999, 20, api.MaxRetryBackoff},
	} {
		m.jitter = func() float64 { return tc.r }
		got, ok := m.retryWait(&httpStatusError{status: 503}, tc.attempt)
		if !ok || got != tc.want {
			t.Errorf("rand %v attempt %d: %s, want %s", tc.r, tc.attempt, got, tc.want)
		}
	}
	m.jitter = func() float64 { return 0.9 }
	got, ok := m.retryWait(&httpStatusError{status: 429, header: http.Header{"Retry-After": {"3"}}}, 0)
	if !ok || got != 3*time.Second {
		t.Errorf("Retry-After 3: %s", got)
	}
}

// stubModel answers from a function.
type stubModel func(ctx context.Context, req *Request) (*Response, error)

func (f stubModel) Complete(ctx context.Context, req *Request) (*Response, error) { return f(ctx, req) }

// A call whose endpoint streamed part of its answer and then failed is not
// failed over (the caller already has the part); one that failed before any
// text is.
func TestNoFailoverAfterStreamedText(t *testing.T) {
	var secondCalls int
	second := stubModel(func(ctx context.Context, req *Request) (*Response, error) {
		secondCalls++
		req.OnText("whole answer")
		return &Response{Content: "whole answer", Finish: FinishStop}, nil
	})
	for _, tc := range []struct {
		name       string
		first      stubModel
		wantSecond int
		wantText   string
	}{
		{"cut after a chunk", func(ctx context.Context, req *Request) (*Response, error) {
			req.OnText("part of ")
			return nil, &answerError{io.ErrUnexpectedEOF}
		}, 0, "part of "},
		{"failed before any text", func(ctx context.Context, req *Request) (*Response, error) {
			return nil, &answerError{io.ErrUnexpectedEOF}
		}, 1, "whole answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secondCalls = 0
			now := time.Now
			m := &failoverModel{log: slog.New(slog.DiscardHandler), eps: []*endpoint{
				{ref: api.EndpointRef{Endpoint: "http://a/v1"}, model: tc.first, br: newBreaker(api.EndpointRef{Endpoint: "http://a/v1"}, api.BreakerPolicy{}, now)},
				{ref: api.EndpointRef{Endpoint: "http://b/v1"}, model: second, br: newBreaker(api.EndpointRef{Endpoint: "http://b/v1"}, api.BreakerPolicy{}, now)},
			}}
			var got strings.Builder
			_, err := m.Complete(context.Background(), &Request{OnText: func(s string) { got.WriteString(s) }})
			if secondCalls != tc.wantSecond || got.String() != tc.wantText {
				t.Fatalf("second called %d times, text %q, err %v; want %d, %q", secondCalls, got.String(), err, tc.wantSecond, tc.wantText)
			}
			if tc.wantSecond == 0 && (err == nil || !strings.Contains(err.Error(), "not failed over")) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestClassifyStreamErrors: an error met inside a stream that began with
// 200 counts as what it is (a server error, a rate limit, a cut answer),
// not as an unknown error: the breakers and the metrics read it so.
func TestClassifyStreamErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("read streamed answer: %w", &streamEventError{message: "overloaded"}), api.CallServerError},
		{&streamError{typ: "overloaded_error"}, api.CallServerError},
		{&streamError{typ: "rate_limit_error"}, api.CallRateLimited},
		{&streamError{typ: "invalid_request_error"}, api.CallClientError},
		{fmt.Errorf("%w (after 3 chunks)", ErrStreamCut), api.CallBadAnswer},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
