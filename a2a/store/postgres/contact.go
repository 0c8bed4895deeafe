package postgres

import (
	"sync"
	"time"
)

// Judging leases after an outage. A replica's lease is judged expired when
// its heartbeat, by the database's clock, is older than the lease: but a
// database that was stopped (or out of every replica's reach) for longer
// than a lease comes back with every heartbeat that old, and the first
// replica to look would take every other one's tasks over, then be taken
// over in turn. So a replica judges no other one's lease (it lists no
// orphans, claims none of their tasks or push notifications, deletes none
// of their watches) while its own contact with the database is broken (its
// last renewal failed, or succeeded more than half a lease ago), and for a
// lease after the contact returns: every live replica renews within two
// thirds of a lease of the database's return (a renewal every third of it,
// retried at once after one that failed; heartbeat), so that once this one
// judges again, only a replica that is really gone has an expired lease.
// What a replica was cut off alone (a partition) is the others' to judge:
// they kept their contact.

// contact is what a replica knows of its own contact with the database. It
// is safe for concurrent use; the zero value is a contact that was never
// made (mayJudge is false).
type contact struct {
	lease time.Duration

	mu        sync.Mutex // guards the fields below
	lastOK    time.Time  // the last renewal that succeeded (at Open, the lease taken)
	cutOff    bool       // the last renewal failed
	judgeFrom time.Time  // no lease judged before this
}

// newContact is the contact of a replica that just took its lease: it may
// judge at once (what it reads is what the database says now).
func newContact(lease time.Duration) *contact {
	return &contact{lease: lease, lastOK: time.Now()}
}

// maxGap is the longest time between two renewals that keeps the contact
// unbroken: half the lease, where the renewals come every third of it.
func (c *contact) maxGap() time.Duration { return c.lease / 2 }

// renewed records a renewal that succeeded; it returns how long the
// contact had been broken when this renewal restored it, 0 when it had not
// been.
func (c *contact) renewed() time.Duration {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	gap := now.Sub(c.lastOK)
	c.lastOK = now
	if !c.cutOff && gap <= c.maxGap() {
		return 0
	}
	c.cutOff = false
	c.judgeFrom = now.Add(c.lease)
	return gap
}

// failed records a renewal that failed; it reports whether the contact had
// been unbroken until then.
func (c *contact) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := !c.cutOff
	c.cutOff = true
	return was
}

// mayJudge reports whether this replica may judge other replicas' leases
// now: its contact is unbroken (its last renewal succeeded less than half a
// lease ago) and has been for a lease. A judgement read from the database
// holds only if mayJudge is still true once it is read: a contact broken
// meanwhile may have held the read until the database came back.
func (c *contact) mayJudge() bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.cutOff && now.Sub(c.lastOK) <= c.maxGap() && !now.Before(c.judgeFrom)
}
