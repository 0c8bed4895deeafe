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
