package budget

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

// ledger holds entries named OWNER-N of size 10 each, finished as listed.
func ledger(t *testing.T, l Limits, entries ...string) *Ledger[string] {
	t.Helper()
	led := New[string](l)
	for i, e := range entries {
		owner, finished := e[:1], e[len(e)-1] == 'f'
		if evicted, err := led.Admit(e, owner, 10); err != nil || len(evicted) > 0 {
			t.Fatalf("setup %s: %v %v", e, evicted, err)
		}
		if finished {
			led.Finish(e, t0.Add(time.Duration(i)*time.Second))
		}
	}
	return led
}

func TestAdmitPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limits  Limits
		held    []string // OWNER + index + f if finished, in admission (and finishing) order
		owner   string
		evicted []string
		err     error
	}{
		{"room", Limits{10, 100, 5, 50}, []string{"a1f", "b1f"}, "a", nil, nil},
		{"own quota: own oldest finished goes", Limits{10, 100, 2, 50}, []string{"a1f", "a2f", "b1f"}, "a", []string{"a1f"}, nil},
		{"own quota full of running entries", Limits{10, 100, 2, 50}, []string{"a1", "a2", "b1f"}, "a", nil, ErrQuota},
		{"byte quota", Limits{10, 100, 5, 25}, []string{"a1f", "a2f"}, "a", []string{"a1f"}, nil},
		{"store full: own first", Limits{3, 100, 2, 100}, []string{"b1f", "a1f", "b2f"}, "a", []string{"a1f"}, nil},
		{"store full: never another's within its share", Limits{4, 100, 3, 100}, []string{"b1f", "b2f", "a1", "a2"}, "a", nil, ErrFull},
		{"store full: another's over its share goes", Limits{3, 100, 2, 100}, []string{"b1f", "b2f", "a1"}, "a", []string{"b1f"}, nil},
		{"store full: a new owner takes the oldest over a share", Limits{4, 100, 2, 100}, []string{"b1f", "b2f", "c1f", "c2f"}, "a", []string{"b1f"}, nil},
		{"store full: the oldest over its share goes, not an older within", Limits{6, 100, 3, 100}, []string{"c1f", "b1f", "b2f", "b3f", "c2f", "a1"}, "a", []string{"b1f"}, nil},
		{"store full: over a share, but running", Limits{4, 100, 2, 100}, []string{"b1", "b2", "c1f", "d1"}, "a", nil, ErrFull},
		{"store bytes full: another's over its byte share goes", Limits{10, 40, 10, 30}, []string{"b1f", "b2f", "b3f", "a1"}, "a", []string{"b1f"}, nil},
		{"store bytes full: own first", Limits{10, 30, 10, 30}, []string{"b1f", "a1f", "b2f"}, "a", []string{"a1f"}, nil},
		{"no quota: own first, then anyone's oldest", Limits{3, 100, 3, 100}, []string{"b1f", "b2f", "a1"}, "a", []string{"b1f"}, nil},
		{"no quota, store full of running entries", Limits{2, 100, 2, 100}, []string{"b1", "a1"}, "a", nil, ErrFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			led := ledger(t, tc.limits, tc.held...)
			beforeC, beforeB := led.Total()
			evicted, err := led.Admit("new", tc.owner, 10)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if !slices.Equal(evicted, tc.evicted) {
				t.Fatalf("evicted %v, want %v", evicted, tc.evicted)
			}
			c, b := led.Total()
			if err != nil && (c != beforeC || b != beforeB) {
				t.Fatal("a refused admission changed the ledger")
			}
			if err == nil && (c != beforeC+1-len(evicted) || b != beforeB+10-10*int64(len(evicted))) {
				t.Fatalf("total %d, %d", c, b)
			}
		})
	}
}

// An owner over its quota (its running entries grew) loses its finished
// entries to another owner's new ones, oldest first, until it is within.
func TestOverQuotaOwnerPays(t *testing.T) {
	led := New[string](Limits{MaxCount: 100, MaxBytes: 100, QuotaCount: 10, QuotaBytes: 40})
	for i := range 3 {
		led.Admit(fmt.Sprint("b", i), "b", 10)
		led.Finish(fmt.Sprint("b", i), t0.Add(time.Duration(i)))
	}
	led.Admit("c0", "c", 10)
	led.Finish("c0", t0)
	led.Admit("a0", "a", 10)
	led.Admit("bgrow", "b", 10)
	// The running entry grows to 60: the store holds 110 > 100, and b's own
	// oldest finished entry goes.
	if ev := led.Resize("bgrow", 60); !slices.Equal(ev, []string{"b0"}) {
		t.Fatalf("resize evicted %v", ev)
	}
	// b holds 20+60 = 80 > its 40: over quota. a's new entry, with the store
	// at 100, takes b's oldest finished, not c's (within its quota).
	ev, err := led.Admit("a1", "a", 10)
	if err != nil || !slices.Equal(ev, []string{"b1"}) {
		t.Fatalf("admit: %v %v", ev, err)
	}
}

// Issue 28: with the default quota (an eighth of the store), eight owners
// within their quota filled the store with finished entries and a ninth
// owner, holding nothing, was refused until their retention ran out. Now
// every entry of the ninth is admitted up to its fair share (10000/9), each
// evicting the oldest finished entry of an owner over its share, and none
// of the eight is taken under its share.
func TestNinthOwnerGetsItsShare(t *testing.T) {
	led := New[string](Limits{MaxCount: 10000, MaxBytes: 10000 * 10, QuotaCount: 1250, QuotaBytes: 1250 * 10})
	at := t0
	for o := range 8 {
		for i := range 1250 {
			key := fmt.Sprint(o, "-", i)
			if _, err := led.Admit(key, fmt.Sprint("owner", o), 10); err != nil {
				t.Fatalf("setup %s: %v", key, err)
			}
			at = at.Add(time.Millisecond)
			led.Finish(key, at)
		}
	}
	refused := 0
	const share = 10000 / 9
	for i := range share {
		if _, err := led.Admit(fmt.Sprint("ninth-", i), "ninth", 10); err != nil {
			refused++
		}
	}
	if refused > 0 {
		t.Fatalf("the ninth owner, within its share of %d, was refused %d times", share, refused)
	}
	for o := range 8 {
		if c, _ := led.Usage(fmt.Sprint("owner", o)); c < share {
			t.Errorf("owner%d was taken under its share: %d", o, c)
		}
	}
	if c, _ := led.Total(); c != 10000 {
		t.Fatalf("the store holds %d", c)
	}
}

func TestExpireAndRemove(t *testing.T) {
	led := ledger(t, Limits{10, 100, 10, 100}, "a1f", "a2f", "b1", "a3f")
	if got := led.Expire(t0.Add(time.Second)); !slices.Equal(got, []string{"a1f", "a2f"}) {
		t.Fatalf("expired %v", got)
	}
	led.Remove("b1")
	if c, b := led.Total(); c != 1 || b != 10 {
		t.Fatalf("total %d %d", c, b)
	}
	if c, _ := led.Usage("b"); c != 0 {
		t.Fatal("b still has entries")
	}
	if _, ok := led.Finished("a3f"); !ok {
		t.Fatal("a3f not finished")
	}
	if _, err := led.Admit("big", "a", 101); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an entry over the quota alone: %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, l := range []Limits{{}, {1, 1, 2, 1}, {1, 1, 1, 2}, {-1, 1, 1, 1}} {
		if l.Validate() == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}

// Load takes entries as they are, over the bounds if need be; the next
// admission makes room.
func TestLoad(t *testing.T) {
	led := New[string](Limits{2, 100, 2, 100})
	led.Load("a1", "a", 10, true, t0)
	led.Load("a2", "a", 10, true, t0.Add(time.Second))
	led.Load("a3", "a", 10, false, time.Time{})
	if c, b := led.Total(); c != 3 || b != 30 {
		t.Fatalf("total %d %d", c, b)
	}
	ev, err := led.Admit("a4", "a", 10)
	if err != nil || !slices.Equal(ev, []string{"a1", "a2"}) {
		t.Fatalf("admit after an over-full load: %v %v", ev, err)
	}
}

func TestMemoryDefaults(t *testing.T) {
	for _, tc := range []struct {
		reserve    uint64
		task, blob int64
	}{
		{256 * MiB, 64 * MiB, 32 * MiB}, // a 1 GiB pod's reserve
		{96 * MiB, 24 * MiB, 12 * MiB},  // the reserve's floor
		{16 << 30, 1024 * MiB, 512 * MiB},
		{0, 16 * MiB, 8 * MiB},
	} {
		if got := TaskStoreBytes(tc.reserve); got != tc.task {
			t.Errorf("TaskStoreBytes(%d MiB) = %d MiB, want %d", tc.reserve/MiB, got/MiB, tc.task/MiB)
		}
		if got := BlobStoreBytes(tc.reserve); got != tc.blob {
			t.Errorf("BlobStoreBytes(%d MiB) = %d MiB, want %d", tc.reserve/MiB, got/MiB, tc.blob/MiB)
		}
	}
}

// TestAdmitEntry: entries held by handle (AdmitEntry, ResizeEntry,
// FinishEntry) go as the policy says, oldest finished first, a running one
// never, and the ledger does not know them by key.
func TestAdmitEntry(t *testing.T) {
	led := New[string](Limits{3, 100, 3, 100})
	ents := make([]Entry[string], 6)
	admit := func(i int) []string {
		t.Helper()
		keys, err := led.AdmitEntry(&ents[i], fmt.Sprint("e", i), "a", 10)
		if err != nil {
			t.Fatalf("e%d: %v", i, err)
		}
		return keys
	}
	for i := range 3 {
		admit(i)
	}
	led.FinishEntry(&ents[2], t0)
	led.FinishEntry(&ents[0], t0.Add(time.Second))
	led.FinishEntry(&ents[0], t0.Add(2*time.Second)) // finished once
	if got := admit(3); !slices.Equal(got, []string{"e2"}) {
		t.Fatalf("admitting e3 evicted %v, want e2 (the oldest finished)", got)
	}
	if got := admit(4); !slices.Equal(got, []string{"e0"}) {
		t.Fatalf("admitting e4 evicted %v, want e0", got)
	}
	if _, err := led.AdmitEntry(&ents[5], "e5", "a", 10); !errors.Is(err, ErrFull) {
		t.Fatalf("three running entries: %v, want ErrFull", err)
	}
	led.FinishEntry(&ents[3], t0)
	if got := led.ResizeEntry(&ents[1], 95); !slices.Equal(got, []string{"e3"}) { // 95+10+10 > 100: a finished one goes, not the resized
		t.Fatalf("the growth evicted %v, want e3", got)
	}
	if c, b := led.Total(); c != 2 || b != 105 {
		t.Fatalf("total %d entries, %d bytes; want 2, 105", c, b)
	}
	if _, ok := led.Finished("e0"); ok || len(led.entries) != 0 {
		t.Fatal("the ledger knows an entry held by handle by its key")
	}
}

// TestAdmitEntryAllocs: admitting an entry held by handle that evicts one,
// then its growth and finish, allocate only the evicted keys returned (an
// entry of the ledger's own, two list elements and the plan's list were
// three more).
func TestAdmitEntryAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	led := New[string](Limits{4, 1 << 20, 4, 1 << 20})
	const n = 200
	ents, names := make([]Entry[string], n), make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("e", i)
	}
	i := 0
	step := func() {
		keys, err := led.AdmitEntry(&ents[i], names[i], "a", 10)
		if err != nil || (i >= 4 && len(keys) != 1) {
			t.Fatalf("e%d: evicted %v, %v", i, keys, err)
		}
		led.ResizeEntry(&ents[i], 12)
		led.FinishEntry(&ents[i], t0)
		i++
	}
	for range 8 {
		step()
	}
	if got := testing.AllocsPerRun(100, step); got != 1 {
		t.Errorf("an admission that evicts, a growth, a finish: %.0f allocations, want 1", got)
	}
}
