// Package budget decides what a bounded store keeps: entries counted and
// sized, bounded in all and per owner (the caller that created them), and
// evicted only once finished, the owner's own first. agentd's task store and
// blob store both keep their entries under a Ledger.
//
// An owner's fair share is the store's bounds divided by the owners holding
// entries, the new entry's owner counted (with N owners: MaxCount/N entries
// and MaxBytes/N bytes, rounded down), and never more than its quota. What
// an owner holds up to its share is its own: no other owner's entry evicts
// it. What it holds beyond its share (in entries or in bytes) may go to make
// room for anyone.
//
// The policy, for a new entry of owner O:
//
//  1. O's quota: while O's entries and the new one exceed O's count or byte
//     quota, O's oldest finished entry goes; if O has none left, the new
//     entry is refused (ErrQuota): O's running entries fill its quota.
//  2. The store's bounds: while all entries and the new one exceed the
//     store's count or bytes, O's oldest finished entry goes, and once O has
//     none, the oldest finished entry of an owner that is over its fair
//     share (as it stands after what the plan already takes from it); an
//     owner within its share loses nothing to another's entries. If nothing
//     may go, the new entry is refused (ErrFull). With no quota (quotas
//     equal to the store's bounds), the oldest finished entry of any owner
//     goes, after O's own.
//
// So an owner that, with the new entry, stays within its share is refused
// only when the others' entries beyond their shares are running: those
// entries are at least as many (and as large) as the room it needs, since
// the N-1 others hold more than N-1 shares between them when the store is
// full. With a share of a fixed quota instead (the policy before issue 28),
// owners each within a quota of MaxCount/8 filled the store and a ninth was
// refused.
//
// A refused entry evicts nothing. A running entry that grows (Resize) may
// push the store over its byte bound: then finished entries go as in step 2,
// and if none may, the store stays over its bound until entries finish or
// go; a growth is never refused.
package budget

import (
	"errors"
	"fmt"
	"time"
)

// Limits are a Ledger's bounds. Every field must be positive.
type Limits struct {
	MaxCount   int   // entries in all
	MaxBytes   int64 // bytes in all
	QuotaCount int   // entries of one owner
	QuotaBytes int64 // bytes of one owner
}

// Validate reports a bound that is not positive, or a quota over its bound.
func (l Limits) Validate() error {
	switch {
	case l.MaxCount <= 0 || l.MaxBytes <= 0 || l.QuotaCount <= 0 || l.QuotaBytes <= 0:
		return fmt.Errorf("budget: every bound must be positive (%+v)", l)
	case l.QuotaCount > l.MaxCount || l.QuotaBytes > l.MaxBytes:
		return fmt.Errorf("budget: a quota is over its bound (%+v)", l)
	}
	return nil
}

// Errors of Admit.
var (
	ErrFull     = errors.New("budget: no room: the entries held are running, or belong to owners within their fair share")
	ErrQuota    = errors.New("budget: the owner's quota is full of running entries")
	ErrTooLarge = errors.New("budget: the entry alone is over the owner's byte quota")
)

// Ledger tracks entries by key. It is not safe for concurrent use: the store
// that owns it calls it under its own lock. Create it with New.
type Ledger[K comparable] struct {
	lim      Limits
	entries  map[K]*Entry[K]
	owners   map[string]*owner[K]
	count    int
	bytes    int64
	finished finishedList[K] // in finishing order: expiry and the over-quota walk
	scratch  []*Entry[K]     // plan's list, reused: a plan lives within one call of Admit
}

// Entry is one entry the ledger tracks. An entry admitted by key (Admit,
// Load) is the ledger's, found by its key; one admitted by AdmitEntry lives
// in the caller's own record of it (a store's value, found by the store's
// map) and is known to the ledger by that handle only, which spares a
// lookup in the ledger's map on each of its changes. Its zero value is
// ready for AdmitEntry.
type Entry[K comparable] struct {
	key        K
	owner      *owner[K]
	size       int64
	finishedAt time.Time
	finished   bool
	links      [2]link[K] // its places in Ledger.finished and owner.finished, once finished
}

type owner[K comparable] struct {
	name     string
	count    int
	bytes    int64
	finished finishedList[K] // oldest first
}

// newOwner is a new owner that holds nothing yet.
func newOwner[K comparable](name string) *owner[K] {
	return &owner[K]{name: name, finished: finishedList[K]{i: 1}}
}

// link is an entry's place in a finishedList.
type link[K comparable] struct{ prev, next *Entry[K] }

// finishedList is a list of finished entries, oldest first, threaded
// through the entries themselves (link i of each: 0 for the ledger's list,
// 1 for their owner's), so that a finish allocates nothing.
type finishedList[K comparable] struct {
	front, back *Entry[K]
	i           int
}

func (q *finishedList[K]) pushBack(e *Entry[K]) {
	e.links[q.i] = link[K]{prev: q.back}
	if q.back != nil {
		q.back.links[q.i].next = e
	} else {
		q.front = e
	}
	q.back = e
}

func (q *finishedList[K]) remove(e *Entry[K]) {
	lk := &e.links[q.i]
	if lk.prev != nil {
		lk.prev.links[q.i].next = lk.next
	} else {
		q.front = lk.next
	}
	if lk.next != nil {
		lk.next.links[q.i].prev = lk.prev
	} else {
		q.back = lk.prev
	}
	*lk = link[K]{}
}

// next is the entry after e in the list.
func (q *finishedList[K]) next(e *Entry[K]) *Entry[K] { return e.links[q.i].next }

// New returns an empty ledger with these limits (checked by Validate; New
// panics on limits that do not validate: they are the caller's
// configuration, checked before).
func New[K comparable](l Limits) *Ledger[K] {
	if err := l.Validate(); err != nil {
		panic(err)
	}
	return &Ledger[K]{lim: l, entries: make(map[K]*Entry[K]), owners: make(map[string]*owner[K])}
}

// Limits returns the ledger's bounds.
func (l *Ledger[K]) Limits() Limits { return l.lim }

// Total returns the entries and bytes held.
func (l *Ledger[K]) Total() (count int, bytes int64) { return l.count, l.bytes }

// Usage returns the entries and bytes an owner holds.
func (l *Ledger[K]) Usage(owner string) (count int, bytes int64) {
	if o := l.owners[owner]; o != nil {
		return o.count, o.bytes
	}
	return 0, 0
}

// share is the fair share of each of n owners: the store's bounds divided by
// n, within the quota.
func (l *Ledger[K]) share(n int) (count int, bytes int64) {
	n = max(n, 1)
	return min(l.lim.QuotaCount, l.lim.MaxCount/n), min(l.lim.QuotaBytes, l.lim.MaxBytes/int64(n))
}

// overShare reports whether an owner holding count entries and bytes bytes
// may lose finished entries to another owner's: it is over the share
// (count, bytes are share's), or there is no quota (every owner's finished
// entries are fair game, oldest first).
func (l *Ledger[K]) overShare(count int, bytes int64, shareCount int, shareBytes int64) bool {
	return l.noQuota() || count > shareCount || bytes > shareBytes
}

// noQuota reports whether the quotas are the store's bounds: no owner has a
// quota of its own.
func (l *Ledger[K]) noQuota() bool {
	return l.lim.QuotaCount == l.lim.MaxCount && l.lim.QuotaBytes == l.lim.MaxBytes
}

// Admit makes room for a new running entry of size bytes owned by owner,
// as the package's policy says, and records it. It returns the keys evicted
// to make room (the ledger has forgotten them; the store drops them), or an
// error, having evicted nothing. The key must not be held already.
func (l *Ledger[K]) Admit(key K, ownerName string, size int64) ([]K, error) {
	if _, dup := l.entries[key]; dup {
		return nil, fmt.Errorf("budget: %v is held already", key)
	}
	e := &Entry[K]{}
	keys, err := l.AdmitEntry(e, key, ownerName, size)
	if err == nil {
		l.entries[key] = e
	}
	return keys, err
}

// AdmitEntry is Admit of an entry held in e (its zero value, not held
// already), which the caller keeps and names in ResizeEntry and
// FinishEntry: the ledger does not look it up by key (Resize, Finish,
// Finished and Remove do not know it), and the caller makes sure the key is
// not held already.
func (l *Ledger[K]) AdmitEntry(e *Entry[K], key K, ownerName string, size int64) ([]K, error) {
	if size > l.lim.QuotaBytes {
		return nil, fmt.Errorf("%w: %d bytes, quota %d", ErrTooLarge, size, l.lim.QuotaBytes)
	}
	o := l.owners[ownerName]
	if o == nil {
		o = newOwner[K](ownerName)
	}
	plan, err := l.plan(o, 1, size)
	if err != nil {
		if o.count == 0 {
			delete(l.owners, ownerName)
		}
		return nil, err
	}
	keys := l.evict(plan)
	clear(plan) // the scratch holds no entry that went
	l.scratch = plan[:0]
	l.owners[ownerName] = o
	*e = Entry[K]{key: key, owner: o, size: size}
	o.count++
	o.bytes += size
	l.count++
	l.bytes += size
	return keys, nil
}

// Load records an entry as it is, without making room for it: an entry a
// durable store already holds, read back at its start (the store may be over
// its bounds until entries go). A finished entry is evictable from at on.
func (l *Ledger[K]) Load(key K, ownerName string, size int64, finished bool, at time.Time) {
	if _, dup := l.entries[key]; dup {
		return
	}
	o := l.owners[ownerName]
	if o == nil {
		o = newOwner[K](ownerName)
		l.owners[ownerName] = o
	}
	l.entries[key] = &Entry[K]{key: key, owner: o, size: size}
	o.count++
	o.bytes += size
	l.count++
	l.bytes += size
	if finished {
		l.Finish(key, at)
	}
}

// plan chooses the finished entries that go to make room for count more
// entries and bytes more bytes of owner o, without changing anything.
func (l *Ledger[K]) plan(o *owner[K], count int, bytes int64) ([]*Entry[K], error) {
	plan := l.scratch[:0]
	refuse := func(err error) ([]*Entry[K], error) {
		clear(plan) // the scratch holds no entry
		l.scratch = plan[:0]
		return nil, err
	}
	oc, ob := o.count+count, o.bytes+bytes
	tc, tb := l.count+count, l.bytes+bytes
	own := o.finished.front
	take := func(e *Entry[K]) {
		plan = append(plan, e)
		tc, tb = tc-1, tb-e.size
	}
	for (count > 0 && oc > l.lim.QuotaCount) || ob > l.lim.QuotaBytes {
		if own == nil {
			if l.noQuota() {
				break // no quota of its own: the store's bounds decide
			}
			return refuse(fmt.Errorf("%w: %d entries, %d bytes held (quota %d, %d bytes)", ErrQuota, o.count, o.bytes, l.lim.QuotaCount, l.lim.QuotaBytes))
		}
		e := own
		take(e)
		oc, ob = oc-1, ob-e.size
		own = o.finished.next(own)
	}
	full := func() bool { return (count > 0 && tc > l.lim.MaxCount) || tb > l.lim.MaxBytes }
	for full() && own != nil {
		take(own)
		own = o.finished.next(own)
	}
	if !full() {
		return plan, nil
	}
	// Others' finished entries, oldest first, while their owner is over its
	// fair share (as it stands after what the plan already takes from it).
	// The owners are those holding entries, and o.
	n := len(l.owners)
	if o.count == 0 {
		n++ // o is new: it holds nothing yet
	}
	sc, sb := l.share(n)
	usage := map[*owner[K]][2]int64{}
	for e := l.finished.front; e != nil && full(); e = l.finished.next(e) {
		p := e.owner
		if p == o {
			continue // o's own are in the plan already
		}
		u, ok := usage[p]
		if !ok {
			u = [2]int64{int64(p.count), p.bytes}
		}
		if !l.overShare(int(u[0]), u[1], sc, sb) {
			continue
		}
		take(e)
		usage[p] = [2]int64{u[0] - 1, u[1] - e.size}
	}
	if full() {
		return refuse(fmt.Errorf("%w: %d entries, %d bytes held (bounds %d, %d bytes)", ErrFull, l.count, l.bytes, l.lim.MaxCount, l.lim.MaxBytes))
	}
	return plan, nil
}

func (l *Ledger[K]) evict(plan []*Entry[K]) []K {
	keys := make([]K, 0, len(plan))
	for _, e := range plan {
		l.remove(e)
		keys = append(keys, e.key)
	}
	return keys
}

// Resize records that a held entry is now size bytes. When that takes the
// store over its byte bound, finished entries go (the entry's owner's first,
// then those of owners over their fair share) and their keys are returned; a
// resize is never refused, so the store may stay over its bound.
func (l *Ledger[K]) Resize(key K, size int64) []K {
	e := l.entries[key]
	if e == nil {
		return nil
	}
	return l.ResizeEntry(e, size)
}

// ResizeEntry is Resize of the held entry e.
func (l *Ledger[K]) ResizeEntry(e *Entry[K], size int64) []K {
	d := size - e.size
	e.size = size
	e.owner.bytes += d
	l.bytes += d
	if d <= 0 || l.bytes <= l.lim.MaxBytes {
		return nil
	}
	// Make room for nothing more: only the byte bound is over.
	o := e.owner
	var plan []*Entry[K]
	tb := l.bytes
	for f := o.finished.front; f != nil && tb > l.lim.MaxBytes; f = o.finished.next(f) {
		if f == e {
			continue
		}
		plan = append(plan, f)
		tb -= f.size
	}
	sc, sb := l.share(len(l.owners))
	usage := map[*owner[K]][2]int64{}
	for f := l.finished.front; f != nil && tb > l.lim.MaxBytes; f = l.finished.next(f) {
		p := f.owner
		if p == o {
			continue
		}
		u, ok := usage[p]
		if !ok {
			u = [2]int64{int64(p.count), p.bytes}
		}
		if !l.overShare(int(u[0]), u[1], sc, sb) {
			continue
		}
		plan = append(plan, f)
		tb -= f.size
		usage[p] = [2]int64{u[0] - 1, u[1] - f.size}
	}
	return l.evict(plan)
}

// Finish makes a held entry evictable from at on; it is finished once.
func (l *Ledger[K]) Finish(key K, at time.Time) {
	if e := l.entries[key]; e != nil {
		l.FinishEntry(e, at)
	}
}

// FinishEntry is Finish of the held entry e.
func (l *Ledger[K]) FinishEntry(e *Entry[K], at time.Time) {
	if e.finished {
		return
	}
	e.finishedAt, e.finished = at, true
	l.finished.pushBack(e)
	e.owner.finished.pushBack(e)
}

// Finished reports whether a held entry has finished, and when.
func (l *Ledger[K]) Finished(key K) (time.Time, bool) {
	e := l.entries[key]
	if e == nil || !e.finished {
		return time.Time{}, false
	}
	return e.finishedAt, true
}

// Remove forgets an entry.
func (l *Ledger[K]) Remove(key K) {
	if e := l.entries[key]; e != nil {
		l.remove(e)
	}
}

// Expire forgets the entries finished at or before cutoff and returns their
// keys.
func (l *Ledger[K]) Expire(cutoff time.Time) []K {
	var keys []K
	for {
		e := l.finished.front
		if e == nil {
			return keys
		}
		if e.finishedAt.After(cutoff) {
			return keys
		}
		l.remove(e)
		keys = append(keys, e.key)
	}
}

func (l *Ledger[K]) remove(e *Entry[K]) {
	delete(l.entries, e.key)
	o := e.owner
	o.count--
	o.bytes -= e.size
	l.count--
	l.bytes -= e.size
	if e.finished {
		l.finished.remove(e)
		o.finished.remove(e)
	}
	if o.count == 0 {
		delete(l.owners, o.name)
	}
}
