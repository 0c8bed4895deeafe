package intelligence

import (
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// breaker is one endpoint's circuit breaker in a child process. Closed, every
// call goes through; Threshold failed calls in a row open it: no call for
// the cool-down (or the endpoint's Retry-After when longer), then it is
// half-open: one trial call, whose success closes it and whose failure
// re-opens it. Each method that changes the state returns the new state (nil
// when it did not change), for the caller to log and report. It is safe for
// concurrent use; the zero value is not usable (newBreaker).
type breaker struct {
	ref    api.EndpointRef
	policy api.BreakerPolicy
	now    func() time.Time

	mu       sync.Mutex // guards the fields below
	state    string     // api.BreakerClosed, api.BreakerOpen or api.BreakerHalfOpen
	since    time.Time
	until    time.Time // while open: when it half-opens
	failures int       // failed calls in a row
	trial    bool      // while half-open: the trial call is under way
	lastErr  string
}

func newBreaker(ref api.EndpointRef, policy api.BreakerPolicy, now func() time.Time) *breaker {
	return &breaker{ref: ref, policy: policy, now: now, state: api.BreakerClosed, since: now()}
}

// adopt starts the breaker from the service-wide state the spawn payload
// carries.
func (b *breaker) adopt(s api.EndpointBreaker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.since, b.until, b.failures, b.lastErr = s.State, s.Since, s.Until, s.Failures, s.LastError
	if b.state == api.BreakerHalfOpen {
		// Another child's trial may be under way; this one makes its own.
		b.trial = false
	}
}

// allow reports whether a call may go to the endpoint now; on an open
// breaker whose cool-down is over it half-opens and grants the one trial.
func (b *breaker) allow() (bool, *api.EndpointBreaker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var change *api.EndpointBreaker
	now := b.now()
	if b.state == api.BreakerOpen && !now.Before(b.until) {
		b.state, b.since, b.trial = api.BreakerHalfOpen, now, false
		change = b.snapshotLocked()
	}
	switch b.state {
	case api.BreakerOpen:
		return false, change
	case api.BreakerHalfOpen:
		if b.trial {
			return false, change
		}
		b.trial = true
	}
	return true, change
}

// release gives back a trial whose call ended with neither a success nor
// a failure of the endpoint (the caller's context ended).
func (b *breaker) release() {
	b.mu.Lock()
	b.trial = false
	b.mu.Unlock()
}

// success records a call the endpoint answered.
func (b *breaker) success() *api.EndpointBreaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.trial, b.lastErr = 0, false, ""
	if b.state == api.BreakerClosed {
		return nil
	}
	b.state, b.since, b.until = api.BreakerClosed, b.now(), time.Time{}
	return b.snapshotLocked()
}

// failure records a failed call; retryAfter is the wait the endpoint asked
// for (zero: none).
func (b *breaker) failure(err error, retryAfter time.Duration) *api.EndpointBreaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.lastErr = clip(err.Error())
	wasTrial := b.state == api.BreakerHalfOpen
	b.trial = false
	if !wasTrial && (b.state == api.BreakerOpen || b.failures < b.policy.Threshold()) {
		return nil
	}
	now := b.now()
	b.state, b.since, b.until = api.BreakerOpen, now, now.Add(max(b.policy.Cool(), retryAfter))
	return b.snapshotLocked()
}

// snapshot returns the breaker's state.
func (b *breaker) snapshot() api.EndpointBreaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *b.snapshotLocked()
}

func (b *breaker) snapshotLocked() *api.EndpointBreaker {
	return &api.EndpointBreaker{Endpoint: b.ref.Endpoint, Model: b.ref.Model, State: b.state, Since: b.since,
		Until: b.until, Failures: b.failures, LastError: b.lastErr}
}
