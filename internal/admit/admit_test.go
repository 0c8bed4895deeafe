package admit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newController(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func enqueue(t *testing.T, c *Controller, caller string, p Priority) *Ticket {
	t.Helper()
	tk, err := c.Enqueue(caller, p)
	if err != nil {
		t.Fatalf("Enqueue(%q, %s): %v", caller, p, err)
	}
	return tk
}

func started(tk *Ticket) bool {
	select {
	case <-tk.Ready():
		return true
	default:
		return false
	}
}

type req struct {
	caller string
	prio   Priority
}

func (r req) String() string { return r.caller + "/" + r.prio.String() }

// serveOrder queues reqs behind busy runs that fill every slot (busy names
// their callers), then ends runs one at a time: first the busy ones in order,
// then whatever started, oldest first. It returns the order the queued
// requests started in.
func serveOrder(t *testing.T, maxRuns int, busy []string, reqs []req) []string {
	t.Helper()
	c := newController(t, Config{Bounds: Bounds{MaxRuns: maxRuns, MaxLive: maxRuns, QueueCapacity: 1000}, QueuePerCaller: 1000})
	var running []*Ticket
	for _, b := range busy {
		running = append(running, enqueue(t, c, b, Normal))
	}
	if len(busy) != maxRuns {
		t.Fatalf("busy must fill the %d slots", maxRuns)
	}
	tickets := map[*Ticket]req{}
	var pending []*Ticket
	for _, r := range reqs {
		tk := enqueue(t, c, r.caller, r.prio)
		if started(tk) {
			t.Fatalf("%s started with every slot busy", r)
		}
		tickets[tk] = r
		pending = append(pending, tk)
	}
	var order []string
	for len(order) < len(reqs) {
		if len(running) == 0 {
			t.Fatalf("nothing running, %d queued, order so far %v", c.Stats().Queued, order)
		}
		running[0].Done()
		running = running[1:]
		var still []*Ticket
		for _, tk := range pending {
			if started(tk) {
				order = append(order, tickets[tk].String())
				running = append(running, tk)
			} else {
				still = append(still, tk)
			}
		}
		pending = still
	}
	for _, tk := range running {
		tk.Done()
	}
	if st := c.Stats(); st.Runs != 0 || st.Live != 0 || st.Queued != 0 || st.Callers != 0 {
		t.Fatalf("after every Done: %+v", st)
	}
	return order
}

func TestDispatchOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxRuns int
		busy    []string
		reqs    []req
		want    []string
	}{
		{
			name: "priority first, FIFO within one caller", maxRuns: 1, busy: []string{"x"},
			reqs: []req{{"a", Low}, {"a", Normal}, {"a", High}, {"a", Normal}},
			want: []string{"a/high", "a/normal", "a/normal", "a/low"},
		},
		{
			name: "round-robin across callers at one priority", maxRuns: 1, busy: []string{"x"},
			reqs: []req{{"a", Normal}, {"a", Normal}, {"a", Normal}, {"b", Normal}, {"c", Normal}, {"b", Normal}},
			want: []string{"a/normal", "b/normal", "c/normal", "a/normal", "b/normal", "a/normal"},
		},
		{
			name: "higher priority beats the round-robin", maxRuns: 1, busy: []string{"x"},
			reqs: []req{{"a", Normal}, {"b", Normal}, {"c", High}, {"a", Low}},
			want: []string{"c/high", "a/normal", "b/normal", "a/low"},
		},
		{
			// Four slots, A holds three: with two callers active the share
			// is two, so B's low run goes before A's high ones.
			name: "a caller over its share waits while another is below it", maxRuns: 4, busy: []string{"a", "a", "a", "z"},
			reqs: []req{{"a", High}, {"a", High}, {"b", Low}},
			want: []string{"b/low", "a/high", "a/high"},
		},
		{
			// The share never leaves a slot idle: with only A waiting, A
			// takes every free slot.
			name: "work-conserving: alone, a caller takes every slot", maxRuns: 2, busy: []string{"a", "a"},
			reqs: []req{{"a", Normal}, {"a", Normal}, {"a", Normal}},
			want: []string{"a/normal", "a/normal", "a/normal"},
		},
		{
			// 256 from one caller and one from another: the other's goes
			// second, not 257th.
			name: "a flood does not starve a second caller", maxRuns: 1, busy: []string{"x"},
			reqs: append(repeat(req{"flood", Normal}, 8), req{"other", Normal}),
			want: append([]string{"flood/normal", "other/normal"}, repeatS("flood/normal", 7)...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := serveOrder(t, tc.maxRuns, tc.busy, tc.reqs)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func repeat(r req, n int) []req {
	out := make([]req, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func repeatS(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// Position predicts the order the round-robin serves in.
func TestPosition(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 100}, QueuePerCaller: 100})
	busy := enqueue(t, c, "x", Normal)
	reqs := []req{{"a", Normal}, {"a", Normal}, {"a", Normal}, {"b", Normal}, {"c", High}, {"b", Low}, {"c", Normal}}
	var tks []*Ticket
	for _, r := range reqs {
		tks = append(tks, enqueue(t, c, r.caller, r.prio))
	}
	// c/high; then normal round-robin a, b, c, a, a; then b/low.
	want := []int{2, 5, 6, 3, 1, 7, 4}
	for i, tk := range tks {
		if got := tk.Position(); got != want[i] {
			t.Errorf("%s (#%d): position %d, want %d", reqs[i], i, got, want[i])
		}
	}
	// Serving follows the positions.
	order := map[*Ticket]int{}
	running := busy
	for n := 1; n <= len(tks); n++ {
		running.Done()
		running = nil
		for _, tk := range tks {
			if _, seen := order[tk]; !seen && started(tk) {
				order[tk] = n
				running = tk
			}
		}
		if running == nil {
			t.Fatal("nothing started")
		}
		if running.Position() != 0 {
			t.Fatal("a started run has a position")
		}
	}
	running.Done()
	for i, tk := range tks {
		if order[tk] != want[i] {
			t.Errorf("%s served #%d, position said %d", reqs[i], order[tk], want[i])
		}
	}
}

// Position counts the fair shares: a caller over its share waits behind
// another's run even when it asked first or higher.
func TestPositionCountsShares(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 4, MaxLive: 4, QueueCapacity: 100}, QueuePerCaller: 100})
	for i := 0; i < 4; i++ {
		enqueue(t, c, "flood", Normal)
	}
	var flood []*Ticket
	for i := 0; i < 3; i++ {
		flood = append(flood, enqueue(t, c, "flood", High))
	}
	other := enqueue(t, c, "other", Low)
	// Two callers, a share of two: "other" is below it, "flood" holds four.
	if got := other.Position(); got != 1 {
		t.Fatalf("the other caller's run is at %d, want 1", got)
	}
	for i, tk := range flood {
		if got := tk.Position(); got != i+2 {
			t.Fatalf("flood's queued run %d is at %d, want %d", i, got, i+2)
		}
	}
}

func TestShedding(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 2, MaxLive: 2, QueueCapacity: 3}, RunEstimate: 4 * time.Second})
	a1, a2 := enqueue(t, c, "a", Normal), enqueue(t, c, "a", Normal)
	if !started(a1) || !started(a2) {
		t.Fatal("free slots did not start runs")
	}
	// The per-caller share of the queue is half of it, rounded up: 2.
	q1, q2 := enqueue(t, c, "a", Normal), enqueue(t, c, "a", Normal)
	_, err := c.Enqueue("a", High)
	var shed *ShedError
	if !errors.As(err, &shed) || shed.Reason != ReasonCallerQueueFull || !errors.Is(err, ErrShed) {
		t.Fatalf("third queued from one caller: %v, want %s", err, ReasonCallerQueueFull)
	}
	b1 := enqueue(t, c, "b", Normal)
	_, err = c.Enqueue("c", Normal)
	if !errors.As(err, &shed) || shed.Reason != ReasonQueueFull {
		t.Fatalf("a full queue: %v, want %s", err, ReasonQueueFull)
	}
	// 3 queued + this one, 2 at a time, 4s each: 8s.
	if shed.RetryAfter != 8*time.Second || shed.RetryAfterSeconds() != 8 || shed.Queued != 3 {
		t.Fatalf("shed = %+v, want a retry after 8s with 3 queued", shed)
	}
	if !strings.Contains(shed.Error(), "retry after 8s") {
		t.Fatalf("error text %q", shed.Error())
	}
	st := c.Stats()
	if st.Shed[ReasonQueueFull] != 1 || st.Shed[ReasonCallerQueueFull] != 1 || st.Queued != 3 || st.Runs != 2 || st.Live != 2 {
		t.Fatalf("stats %+v", st)
	}
	for _, tk := range []*Ticket{a1, a2, q1, q2, b1} {
		tk.Done()
	}
	if st := c.Stats(); st.Runs != 0 || st.Queued != 0 || st.Admitted != 5 || st.Cancelled != 0 {
		t.Fatalf("after Done: %+v", st)
	}
}

func TestRetryAfterBounds(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 1}, RetryMin: 2 * time.Second, RetryMax: 30 * time.Second, Clock: clock})
	tk := enqueue(t, c, "a", Normal)
	now = now.Add(100 * time.Millisecond)
	tk.Done() // runs are short now
	tk = enqueue(t, c, "a", Normal)
	if _, err := c.Enqueue("a", Normal); err == nil || err.(*ShedError).RetryAfter != 2*time.Second {
		t.Fatalf("short runs: %v, want the 2s floor", err)
	}
	now = now.Add(time.Hour)
	tk.Done()
	tk = enqueue(t, c, "a", Normal)
	defer tk.Done()
	if _, err := c.Enqueue("a", Normal); err == nil || err.(*ShedError).RetryAfter != 30*time.Second {
		t.Fatalf("long runs: %v, want the 30s cap", err)
	}
}

func TestCancelQueued(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4}})
	run := enqueue(t, c, "a", Normal)
	q1, q2 := enqueue(t, c, "b", Normal), enqueue(t, c, "c", Normal)
	if q1.Position() != 1 || q2.Position() != 2 {
		t.Fatalf("positions %d, %d", q1.Position(), q2.Position())
	}
	if !q1.Cancel() {
		t.Fatal("a queued run did not cancel")
	}
	if q1.Cancel() {
		t.Fatal("a second cancel reported a queued run")
	}
	if q2.Position() != 1 {
		t.Fatalf("after the cancel ahead: position %d", q2.Position())
	}
	run.Done()
	if started(q1) {
		t.Fatal("a cancelled run started")
	}
	if !started(q2) {
		t.Fatal("the next run did not start")
	}
	if q2.Cancel() {
		t.Fatal("a started run cancelled from the queue")
	}
	q2.Done()
	q1.Done() // idempotent on an ended ticket
	if st := c.Stats(); st.Runs != 0 || st.Live != 0 || st.Queued != 0 || st.Cancelled != 1 || st.Callers != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Nested subagents share the process bound with the runs' roots: a nested
// spawn is refused at once when it is full, a run waits for a process slot
// as well as a run slot, and a freed slot goes to the queue first.
func TestProcessSlots(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 2, MaxLive: 3, QueueCapacity: 2}})
	r1 := enqueue(t, c, "a", Normal)
	for range 2 { // two nested spawns: each takes a slot
		if !c.TryAcquire() {
			t.Fatal("nested spawns found no slot with one in use")
		}
	}
	if c.TryAcquire() {
		t.Fatal("a nested spawn passed the process bound")
	}
	r2 := enqueue(t, c, "b", Normal)
	if started(r2) {
		t.Fatal("a run started without a process slot (a run slot was free)")
	}
	if st := c.Stats(); st.Live != 3 || st.Runs != 1 || st.Queued != 1 || st.Refused != 1 {
		t.Fatalf("stats %+v", st)
	}
	c.Release()
	if !started(r2) {
		t.Fatal("the queued run did not take the freed process slot")
	}
	if c.TryAcquire() {
		t.Fatal("a nested spawn took the slot the queue was owed")
	}
	r3 := enqueue(t, c, "c", Normal)
	c.Release()
	if started(r3) {
		t.Fatal("a third run passed max_live_runs")
	}
	if !c.TryAcquire() {
		t.Fatal("a free process slot refused a nested spawn")
	}
	r1.Done()
	if !started(r3) {
		t.Fatal("the queued run did not start once both slots were free")
	}
	c.Release()
	r2.Done()
	r3.Done()
	if st := c.Stats(); st.Live != 0 || st.Runs != 0 || st.Refused != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSetBounds(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 2, QueueCapacity: 2}, Ceiling: Bounds{MaxRuns: 4, MaxLive: 8, QueueCapacity: 10}})
	r1 := enqueue(t, c, "a", Normal)
	q := enqueue(t, c, "a", Normal)
	for _, tc := range []struct {
		b    Bounds
		name string
	}{
		{Bounds{MaxRuns: 5, MaxLive: 8, QueueCapacity: 2}, "max_live_runs"},
		{Bounds{MaxRuns: 2, MaxLive: 9, QueueCapacity: 2}, "max_live_subagents"},
		{Bounds{MaxRuns: 2, MaxLive: 4, QueueCapacity: 11}, "queue_capacity"},
	} {
		var ce *CeilingError
		if err := c.SetBounds(tc.b); !errors.As(err, &ce) || ce.Name != tc.name {
			t.Errorf("SetBounds(%+v) = %v, want a ceiling error on %s", tc.b, err, tc.name)
		}
	}
	if err := c.SetBounds(Bounds{MaxRuns: 3, MaxLive: 2, QueueCapacity: 2}); err == nil {
		t.Error("max_live_runs above max_live_subagents accepted")
	}
	if cur, _ := c.Bounds(); cur != (Bounds{MaxRuns: 1, MaxLive: 2, QueueCapacity: 2}) {
		t.Fatalf("a refused SetBounds changed the bounds: %+v", cur)
	}
	if started(q) {
		t.Fatal("started before the bound was raised")
	}
	if err := c.SetBounds(Bounds{MaxRuns: 2, MaxLive: 2, QueueCapacity: 2}); err != nil {
		t.Fatal(err)
	}
	if !started(q) {
		t.Fatal("raising max_live_runs did not dispatch the queue")
	}
	// Lowering stops nothing.
	if err := c.SetBounds(Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 0}); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Runs != 2 || st.Live != 2 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := c.Enqueue("b", Normal); !errors.Is(err, ErrShed) {
		t.Fatalf("over the lowered bounds with no queue: %v", err)
	}
	r1.Done()
	q.Done()
}

func TestNewRefuses(t *testing.T) {
	for _, cfg := range []Config{
		{Bounds: Bounds{MaxRuns: 0, MaxLive: 1}},
		{Bounds: Bounds{MaxRuns: 2, MaxLive: 1}},
		{Bounds: Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: -1}},
		{Bounds: Bounds{MaxRuns: 2, MaxLive: 2}, Ceiling: Bounds{MaxRuns: 1}},
		{Bounds: Bounds{MaxRuns: 1, MaxLive: 1}, QueuePerCaller: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestClose(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 2}})
	r := enqueue(t, c, "a", Normal)
	q := enqueue(t, c, "a", Normal)
	c.Close()
	c.Close()
	select {
	case <-c.Closed():
	default:
		t.Fatal("Closed not closed")
	}
	var shed *ShedError
	if _, err := c.Enqueue("b", High); !errors.As(err, &shed) || shed.Reason != ReasonClosed {
		t.Fatalf("Enqueue after Close: %v", err)
	}
	r.Done()
	if started(q) {
		t.Fatal("a closed controller dispatched")
	}
	if !q.Cancel() {
		t.Fatal("queued run not cancellable after Close")
	}
	if !c.Stats().Closed {
		t.Fatal("stats: not closed")
	}
}

// Many callers at once, with nested spawns and cancels: the bounds hold at
// every moment, and everything drains. Run with -race.
func TestConcurrentBounds(t *testing.T) {
	const maxRuns, maxLive = 4, 7
	c := newController(t, Config{Bounds: Bounds{MaxRuns: maxRuns, MaxLive: maxLive, QueueCapacity: 64}})
	var runs, live, peakRuns, peakLive atomic.Int64
	peak := func(v *atomic.Int64, n int64) {
		for {
			p := v.Load()
			if n <= p || v.CompareAndSwap(p, n) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	var shed, done, cancelled atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 40; i++ {
				tk, err := c.Enqueue(fmt.Sprintf("caller-%d", g%5), Priority(1+r.IntN(3)))
				if err != nil {
					shed.Add(1)
					continue
				}
				if pos := tk.Position(); pos < 0 || pos > 64 {
					t.Errorf("position %d out of the queue", pos)
				}
				if r.IntN(5) == 0 && tk.Cancel() {
					cancelled.Add(1)
					continue
				}
				<-tk.Ready()
				peak(&peakRuns, runs.Add(1))
				peak(&peakLive, live.Add(1))
				nested := 0
				for j := 0; j < r.IntN(4); j++ {
					if c.TryAcquire() {
						nested++
						peak(&peakLive, live.Add(1))
					}
				}
				for ; nested > 0; nested-- {
					live.Add(-1)
					c.Release()
				}
				live.Add(-1)
				runs.Add(-1)
				tk.Done()
				done.Add(1)
			}
		}(g)
	}
	wg.Wait()
	if peakRuns.Load() > maxRuns || peakLive.Load() > maxLive {
		t.Fatalf("peaks: %d runs (bound %d), %d processes (bound %d)", peakRuns.Load(), maxRuns, peakLive.Load(), maxLive)
	}
	st := c.Stats()
	if st.Runs != 0 || st.Live != 0 || st.Queued != 0 || st.Callers != 0 {
		t.Fatalf("not drained: %+v", st)
	}
	if got := done.Load() + shed.Load() + cancelled.Load(); got != 32*40 {
		t.Fatalf("%d outcomes for %d requests", got, 32*40)
	}
	t.Logf("%d done, %d shed, %d cancelled; peaks %d runs, %d processes", done.Load(), shed.Load(), cancelled.Load(), peakRuns.Load(), peakLive.Load())
}
