package admit

import (
	"errors"
	"testing"
)

// TryStart takes a free slot and never queues; Freed wakes when one frees;
// the controller's own queue comes first; Shed counts and hints for the
// shared queue's length.
func TestTryStartFreedShed(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 2, QueueCapacity: 4}})
	drain := func() bool {
		select {
		case <-c.Freed():
			return true
		default:
			return false
		}
	}
	drain()
	first := c.TryStart("alice", Normal)
	if first == nil || !started(first) {
		t.Fatal("TryStart with a free slot")
	}
	if c.TryStart("bob", High) != nil {
		t.Fatal("TryStart without a free slot")
	}
	if st := c.Stats(); st.Runs != 1 || st.Live != 1 || st.Queued != 0 {
		t.Fatalf("stats after TryStart: %+v", st)
	}
	first.Done()
	if !drain() {
		t.Fatal("Freed not woken when the run ended")
	}
	// A run of the controller's own queue is served before TryStart.
	running := enqueue(t, c, "alice", Normal)
	own := enqueue(t, c, "carol", Normal)
	if c.TryStart("bob", Normal) != nil {
		t.Fatal("TryStart while the controller's own queue waits")
	}
	running.Done()
	if !started(own) {
		t.Fatal("the queued run did not start")
	}
	own.Done()
	drain()
	if capacity, per := c.QueueBounds(); capacity != 4 || per != 2 {
		t.Fatalf("queue bounds %d, %d", capacity, per)
	}
	se := c.Shed(ReasonQueueFull, 4)
	if !errors.Is(se, ErrShed) || se.Reason != ReasonQueueFull || se.Queued != 4 || se.RetryAfterSeconds() < 1 {
		t.Fatalf("shed: %+v", se)
	}
	if c.Stats().Shed[ReasonQueueFull] != 1 {
		t.Fatal("the shed was not counted")
	}
	c.Close()
	if c.TryStart("alice", Normal) != nil {
		t.Fatal("TryStart once closed")
	}
}

// With a shared queue, Stats counts its runs beside the controller's own,
// read at each call; a read that fails adds nothing.
func TestStatsCountTheSharedQueue(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 2, QueueCapacity: 4}})
	run := c.TryStart("alice", Normal)
	if run == nil {
		t.Fatal("TryStart with a free slot")
	}
	defer run.Done()
	if _, err := c.Enqueue("bob", Low); err != nil { // the controller's own queue
		t.Fatal(err)
	}
	shared := map[Priority]int{Normal: 2, High: 1}
	var fail error
	c.SetSharedQueue(func() (map[Priority]int, error) { return shared, fail })
	st := c.Stats()
	if st.Queued != 4 || st.QueuedBy["low"] != 1 || st.QueuedBy["normal"] != 2 || st.QueuedBy["high"] != 1 {
		t.Fatalf("stats with a shared queue: queued %d %v", st.Queued, st.QueuedBy)
	}
	fail = errors.New("database unavailable")
	if st := c.Stats(); st.Queued != 1 || st.QueuedBy["normal"] != 0 {
		t.Fatalf("stats when the shared queue cannot be read: queued %d %v", st.Queued, st.QueuedBy)
	}
}
