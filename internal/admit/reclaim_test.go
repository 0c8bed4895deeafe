package admit

import "testing"

// A run's root that gave its slot back while suspended (Release) and is
// reclaimed when its run ends (Reclaim) leaves the counts as the run's
// Done expects: nothing taken after it.
func TestReclaimBalancesARunsDone(t *testing.T) {
	c := newController(t, Config{Bounds: Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 10}, QueuePerCaller: 10})
	tk := enqueue(t, c, "a", Normal)
	if !started(tk) {
		t.Fatal("the run did not start")
	}
	c.Release() // suspended: the root's process slot is back
	if st := c.Stats(); st.Live != 0 {
		t.Fatalf("live %d while suspended, want 0", st.Live)
	}
	if !c.TryAcquire() { // another's process takes it meanwhile
		t.Fatal("the slot given back is not free")
	}
	c.Release()
	c.Reclaim() // the run ends suspended
	tk.Done()
	if st := c.Stats(); st.Live != 0 || st.Runs != 0 {
		t.Fatalf("after the run's Done: %+v, want nothing taken", st)
	}
	if !c.TryAcquire() {
		t.Fatal("the slot is not free after the run")
	}
	c.Release()
}
