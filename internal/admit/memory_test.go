package admit

import (
	"errors"
	"testing"
)

// memController is a controller with ample slots and a memory gate of limit
// MiB, 8 MiB a child.
func memController(t *testing.T, limit uint64) *Controller {
	t.Helper()
	c, err := New(Config{
		Bounds: Bounds{MaxRuns: 100, MaxLive: 200, QueueCapacity: 10},
		Memory: MemoryConfig{Limit: limit * MiB, ChildCost: 8 * MiB, FrontFactor: 4, ChildFactor: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isReady(tk *Ticket) bool {
	select {
	case <-tk.Ready():
		return true
	default:
		return false
	}
}

// TestMemoryGateQueuesRuns: a run is admitted only while the memory in use,
// with what the running runs reserve, leaves room for its own reservation;
// the rest wait in the queue and start once a sample shows room.
func TestMemoryGateQueuesRuns(t *testing.T) {
	c := memController(t, 100)
	c.Observe(Sample{Total: 60 * MiB, Self: 40 * MiB})
	var running []*Ticket
	for range 5 { // max(60, 40 + 8n) + 8 <= 100 for each of them
		tk, err := c.Enqueue("a", Normal)
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, tk)
	}
	ready := 0
	for _, tk := range running {
		if isReady(tk) {
			ready++
		}
	}
	if ready != 5 {
		t.Fatalf("%d of 5 runs started, want 5", ready)
	}
	more, err := c.Enqueue("b", Normal)
	if err != nil {
		t.Fatal(err)
	}
	if !isReady(more) {
		t.Fatal("a sixth run (40+48 = 88 <= 100) did not start")
	}
	// A seventh fits by its reservation (40+56 = 96), but the children have
	// grown: the sample says 95 MiB in use.
	c.Observe(Sample{Total: 95 * MiB, Self: 40 * MiB})
	queued, err := c.Enqueue("c", Normal)
	if err != nil {
		t.Fatal(err)
	}
	if isReady(queued) {
		t.Fatal("a run started with 95 of 100 MiB in use and 8 to reserve")
	}
	if st := c.MemoryStats(); st.Estimate != 95*MiB || st.Reserved != 48*MiB {
		t.Fatalf("memory stats %+v, want an estimate of 95 MiB and 48 reserved", st)
	}
	c.Observe(Sample{Total: 70 * MiB, Self: 40 * MiB})
	if !isReady(queued) {
		t.Fatal("the queued run did not start once a sample showed room")
	}
	for _, tk := range append(running, more, queued) {
		tk.Done()
	}
	if st := c.MemoryStats(); st.Reserved != 0 {
		t.Fatalf("reserved %d after every run ended", st.Reserved)
	}
}

// TestMemoryGateMessageBytes: a run reserves ChildFactor times its message's
// bytes beside ChildCost, and a run that does not fit waits even when slots
// are free; one run is always admitted when none holds a slot.
func TestMemoryGateMessageBytes(t *testing.T) {
	c := memController(t, 100)
	c.Observe(Sample{Total: 20 * MiB, Self: 20 * MiB})
	big, err := c.EnqueueMessage("a", Normal, 40*MiB) // 8 + 80 = 88 MiB: over the 80 of room, but nothing runs
	if err != nil {
		t.Fatal(err)
	}
	if !isReady(big) {
		t.Fatal("the only run was held for memory: the service would be stuck")
	}
	small, err := c.EnqueueMessage("b", Normal, 1*MiB) // 8 + 2 = 10: 20+88+10 > 100
	if err != nil {
		t.Fatal(err)
	}
	if isReady(small) {
		t.Fatal("a run started past the memory the big run reserved")
	}
	big.Done()
	if !isReady(small) {
		t.Fatal("the queued run did not start when the big one ended")
	}
	small.Done()
}

// TestMemoryGateNestedSpawn: a nested spawn past the memory is refused.
func TestMemoryGateNestedSpawn(t *testing.T) {
	c := memController(t, 100)
	c.Observe(Sample{Total: 95 * MiB, Self: 30 * MiB})
	if c.TryAcquire() {
		t.Fatal("a nested spawn was admitted with 95 of 100 MiB in use and 8 to reserve")
	}
	c.Observe(Sample{Total: 50 * MiB, Self: 30 * MiB})
	if !c.TryAcquire() {
		t.Fatal("a nested spawn was refused with room")
	}
	c.Release()
	if st := c.MemoryStats(); st.Reserved != 0 {
		t.Fatalf("reserved %d after the release", st.Reserved)
	}
}

// TestReserveMessage: the front reserves FrontFactor times a body's bytes
// before reading it and sheds (ReasonMemory) what does not fit; the first
// message is always read.
func TestReserveMessage(t *testing.T) {
	c := memController(t, 100)
	c.Observe(Sample{Total: 40 * MiB, Self: 40 * MiB})
	first, err := c.ReserveMessage(10 * MiB) // 40 MiB reserved: 80 of 100
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReserveMessage(6 * MiB); err == nil { // 24 more: 104
		t.Fatal("a message past the limit was reserved")
	} else {
		var se *ShedError
		if !errors.As(err, &se) || se.Reason != ReasonMemory || !errors.Is(err, ErrShed) {
			t.Fatalf("err %v, want a shed error with reason %s", err, ReasonMemory)
		}
	}
	second, err := c.ReserveMessage(5 * MiB) // 20 more: 100
	if err != nil {
		t.Fatal(err)
	}
	first()
	first() // idempotent
	second()
	// Released, the reservations linger until a sample has seen what the
	// requests left behind.
	if st := c.MemoryStats(); st.Held != 60*MiB {
		t.Fatalf("held %d MiB after the releases, before a sample; want 60", st.Held>>20)
	}
	if _, err := c.ReserveMessage(6 * MiB); err == nil {
		t.Fatal("a message was reserved in the room of released ones no sample has seen go")
	}
	c.Observe(Sample{Total: 40 * MiB, Self: 40 * MiB})
	if st := c.MemoryStats(); st.Held != 0 {
		t.Fatalf("held %d after the releases and a sample", st.Held)
	}
	if got := c.Stats().Shed[ReasonMemory]; got != 2 {
		t.Fatalf("shed for memory %d, want 2", got)
	}
	// Without a gate nothing is reserved or shed.
	off, err := New(Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.ReserveMessage(1 << 40); err != nil {
		t.Fatal(err)
	}
	// A small body reserves nothing and is never shed.
	c.Observe(Sample{Total: 200 * MiB, Self: 200 * MiB})
	if _, err := c.ReserveMessage(MessageReserveMin - 1); err != nil {
		t.Fatalf("a small body was shed: %v", err)
	}
}

// TestMemoryGateBeyondBounds: with Beyond, runs and nested spawns past the
// count bounds are admitted, up to the ceiling, while the memory measured
// (the sample, what was admitted since the sample before it, the front's)
// leaves room for them and the headroom; children that grow in the samples
// stop it before the limit, and the excess waits in the queue or is shed.
func TestMemoryGateBeyondBounds(t *testing.T) {
	c, err := New(Config{
		Bounds:  Bounds{MaxRuns: 4, MaxLive: 4, QueueCapacity: 3},
		Ceiling: Bounds{MaxRuns: 9, MaxLive: 9, QueueCapacity: 10},
		Memory:  MemoryConfig{Limit: 100 * MiB, ChildCost: 8 * MiB, Beyond: true, Headroom: 10 * MiB},
	})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func() *Ticket {
		t.Helper()
		tk, err := c.Enqueue("a", Normal)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	var tks []*Ticket
	for range 4 {
		if tk := enqueue(); !isReady(tk) {
			t.Fatal("a run within the bounds did not start")
		}
	}
	// No sample yet: nothing measured, so nothing past the bounds.
	fifth := enqueue()
	if isReady(fifth) {
		t.Fatal("a run started past the bounds before any sample")
	}
	// Small children: 30 MiB in use, the four runs' 32 MiB not yet counted
	// as sampled: 30 + 32 + 8 + 10 <= 100.
	c.Observe(Sample{Total: 30 * MiB, Self: 20 * MiB})
	if !isReady(fifth) {
		t.Fatal("a run was not admitted past the bounds with the memory measured small")
	}
	tks = append(tks, fifth)
	for i, want := range []bool{true, true, false} { // 30+32+8 (the fifth)+8+10 = 88, then 96, then 104
		tk := enqueue()
		if isReady(tk) != want {
			t.Fatalf("run %d past the bounds: started %v, want %v (%+v)", i+6, isReady(tk), want, c.MemoryStats())
		}
		tks = append(tks, tk)
	}
	if st := c.MemoryStats(); st.Beyond != 3 || st.Measured+st.Headroom > st.Limit {
		t.Fatalf("memory stats %+v: want 3 past the bounds and the measured plus headroom within the limit", st)
	}
	// The children grow: the samples show 85 MiB. Nothing more starts, a
	// nested spawn is refused, and past the queue a run is shed.
	c.Observe(Sample{Total: 85 * MiB, Self: 20 * MiB})
	c.Observe(Sample{Total: 85 * MiB, Self: 20 * MiB})
	if isReady(tks[3]) {
		t.Fatal("a run started with 85 of 100 MiB in use, 8 to reserve and 10 of headroom")
	}
	if c.TryAcquire() {
		t.Fatal("a nested spawn was admitted past the bounds with no room")
	}
	for _, who := range []string{"c", "d"} {
		if _, err := c.Enqueue(who, Normal); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue("b", Normal); !errors.As(err, new(*ShedError)) {
		t.Fatalf("a run past a full queue: %v, want shed", err)
	}
	// Room again: queued runs start up to the ceiling (9: two of the three).
	c.Observe(Sample{Total: 40 * MiB, Self: 20 * MiB})
	if st := c.Stats(); st.Runs != 9 || st.Queued != 1 {
		t.Fatalf("runs %d, queued %d once a sample showed room: want the ceiling of 9 running", st.Runs, st.Queued)
	}
	for range 3 {
		c.Observe(Sample{Total: 1 * MiB, Self: 1 * MiB})
	}
	if st := c.Stats(); st.Runs != 9 || st.Queued != 1 {
		t.Fatalf("runs %d, queued %d: want the ceiling of 9 running and 1 waiting", st.Runs, st.Queued)
	}
	if c.TryAcquire() {
		t.Fatal("a nested spawn was admitted past the ceiling")
	}
}

// TestMemoryGateBeyondOff: without Beyond the count bounds hold whatever
// the memory measured.
func TestMemoryGateBeyondOff(t *testing.T) {
	c, err := New(Config{
		Bounds:  Bounds{MaxRuns: 2, MaxLive: 2, QueueCapacity: 3},
		Ceiling: Bounds{MaxRuns: 9, MaxLive: 9, QueueCapacity: 10},
		Memory:  MemoryConfig{Limit: 100 * MiB, ChildCost: 8 * MiB},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Observe(Sample{Total: 10 * MiB, Self: 10 * MiB})
	for i := range 3 {
		tk, err := c.Enqueue("a", Normal)
		if err != nil {
			t.Fatal(err)
		}
		if isReady(tk) != (i < 2) {
			t.Fatalf("run %d: started %v", i+1, isReady(tk))
		}
	}
	if c.TryAcquire() {
		t.Fatal("a nested spawn past the bound")
	}
}

// TestMemoryGateBeyondReadsBodies: with Beyond, a message body the runs'
// reservations leave no room for is read when the memory measured does
// (the runs it brings are admitted by that measure too); without Beyond,
// or with the measure full, it is shed.
func TestMemoryGateBeyondReadsBodies(t *testing.T) {
	for _, beyond := range []bool{true, false} {
		c, err := New(Config{
			Bounds:  Bounds{MaxRuns: 10, MaxLive: 10, QueueCapacity: 3},
			Ceiling: Bounds{MaxRuns: 20, MaxLive: 20, QueueCapacity: 10},
			Memory:  MemoryConfig{Limit: 100 * MiB, ChildCost: 8 * MiB, FrontFactor: 16, Beyond: beyond, Headroom: 10 * MiB},
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 8 {
			if tk, err := c.Enqueue("a", Normal); err != nil || !isReady(tk) {
				t.Fatalf("a run within the bounds: %v", err)
			}
		}
		// Reserved 64 MiB over a supervisor of 20: 84 of 100 by the
		// reservations; the children measured small, 30 MiB in all.
		for range 2 {
			c.Observe(Sample{Total: 30 * MiB, Self: 20 * MiB})
		}
		first, err := c.ReserveMessage(1 * MiB) // 16 MiB: the only body being read is always read
		if err != nil {
			t.Fatalf("beyond %v: the first body: %v", beyond, err)
		}
		// 84 + 16 + 16 > 100 by the reservations; 30 + 16 + 16 + 10 = 72
		// measured.
		second, err := c.ReserveMessage(1 * MiB)
		if beyond != (err == nil) {
			t.Fatalf("beyond %v: a second body with 72 of 100 MiB measured: %v (%+v)", beyond, err, c.MemoryStats())
		}
		if err == nil {
			second()
		}
		// The children grow: 70 MiB measured, 70 + 32 + 16 + 10 > 100: shed.
		for range 2 {
			c.Observe(Sample{Total: 70 * MiB, Self: 20 * MiB})
		}
		if _, err := c.ReserveMessage(1 * MiB); !errors.As(err, new(*ShedError)) {
			t.Fatalf("beyond %v: a body with 70 of 100 MiB measured and another being read: %v, want shed", beyond, err)
		}
		first()
	}
}
