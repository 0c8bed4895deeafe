package supervisor

import (
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// The supervisor never calls a model: each child calls its endpoints itself,
// behind a breaker per endpoint in its own process. A child reports each
// call's outcome, each failover and each breaker change upward
// (api.MethodIntelligence); intelView counts them for the metrics and keeps
// the latest state of every endpoint's breaker, which every child spawned
// after gets in its payload (Intelligence.Breakers), so that a fresh child
// does not call an endpoint another has just found dead. The view is
// service-wide: one per supervisor, over every tree.

// maxIntelEndpoints bounds the endpoints the view keeps, whatever children
// report: a label set of the metrics stays bounded.
const maxIntelEndpoints = 64

// IntelligenceCall counts one endpoint's calls that ended with one outcome.
type IntelligenceCall struct {
	api.EndpointRef
	Outcome string
	N       int64
}

// IntelligenceFailover counts the calls that passed from one endpoint to
// another.
type IntelligenceFailover struct {
	From, To api.EndpointRef
	N        int64
}

// IntelligenceCounts are the view's counters, sorted.
type IntelligenceCounts struct {
	Calls     []IntelligenceCall
	Failovers []IntelligenceFailover
}

// intelView is the service-wide view of the intelligence endpoints. It is
// safe for concurrent use; the zero value is empty and ready.
type intelView struct {
	mu        sync.Mutex // guards the maps
	breakers  map[api.EndpointRef]api.EndpointBreaker
	calls     map[callKey]int64
	failovers map[[2]api.EndpointRef]int64
}

type callKey struct {
	ref     api.EndpointRef
	outcome string
}

// note takes one report of a child whose intelligence is spec. A report
// about an endpoint the child was not given, or with an unknown outcome, is
// logged and dropped.
func (v *intelView) note(spec api.Intelligence, r api.IntelligenceReport, log *slog.Logger) {
	ref := api.EndpointRef{Endpoint: r.Endpoint, Model: r.Model}
	if !spec.Holds(ref) || (r.FailoverTo != nil && !spec.Holds(*r.FailoverTo)) {
		log.Warn("intelligence/report about an endpoint the child was not given: dropped", "endpoint", r.Endpoint, "model", r.Model)
		return
	}
	if r.Outcome != "" && !slices.Contains(api.CallOutcomes, r.Outcome) {
		log.Warn("intelligence/report with an unknown outcome: dropped", "outcome", r.Outcome)
		return
	}
	if r.Breaker != nil && (r.Breaker.Endpoint != r.Endpoint || r.Breaker.Model != r.Model) {
		log.Warn("intelligence/report of another endpoint's breaker: dropped", "endpoint", r.Endpoint)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.breakers == nil {
		v.breakers = map[api.EndpointRef]api.EndpointBreaker{}
		v.calls = map[callKey]int64{}
		v.failovers = map[[2]api.EndpointRef]int64{}
	}
	if _, known := v.breakers[ref]; !known && len(v.breakers) >= maxIntelEndpoints {
		return
	}
	prev, known := v.breakers[ref]
	if !known {
		prev = api.EndpointBreaker{Endpoint: r.Endpoint, Model: r.Model, State: api.BreakerClosed}
		v.breakers[ref] = prev
	}
	if r.Outcome != "" {
		v.calls[callKey{ref, r.Outcome}]++
	}
	if r.FailoverTo != nil {
		v.failovers[[2]api.EndpointRef{ref, *r.FailoverTo}]++
	}
	if b := r.Breaker; b != nil && !b.Since.Before(prev.Since) {
		// The latest change wins, whichever child saw it.
		v.breakers[ref] = *b
	}
}

// breakersFor is what a child of spec is handed: the state of those of its
// endpoints' breakers that are not closed.
func (v *intelView) breakersFor(spec api.Intelligence) []api.EndpointBreaker {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []api.EndpointBreaker
	for _, e := range spec.Endpoints() {
		if b, ok := v.breakers[e.Ref()]; ok && b.State != api.BreakerClosed {
			out = append(out, b)
		}
	}
	return out
}

// IntelligenceBreakers returns the service-wide state of every intelligence
// endpoint's breaker that a child has reported on, sorted by endpoint and
// model; an open breaker whose cool-down is over shows as half-open.
func (s *Supervisor) IntelligenceBreakers() []api.EndpointBreaker {
	now := time.Now()
	s.intel.mu.Lock()
	out := make([]api.EndpointBreaker, 0, len(s.intel.breakers))
	for _, b := range s.intel.breakers {
		if b.State == api.BreakerOpen && !now.Before(b.Until) {
			b.State, b.Since = api.BreakerHalfOpen, b.Until
		}
		out = append(out, b)
	}
	s.intel.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Endpoint != out[j].Endpoint {
			return out[i].Endpoint < out[j].Endpoint
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// IntelligenceCounts returns the calls by endpoint and outcome and the
// failovers by endpoint pair, as children reported them.
func (s *Supervisor) IntelligenceCounts() IntelligenceCounts {
	s.intel.mu.Lock()
	var c IntelligenceCounts
	for k, n := range s.intel.calls {
		c.Calls = append(c.Calls, IntelligenceCall{EndpointRef: k.ref, Outcome: k.outcome, N: n})
	}
	for k, n := range s.intel.failovers {
		c.Failovers = append(c.Failovers, IntelligenceFailover{From: k[0], To: k[1], N: n})
	}
	s.intel.mu.Unlock()
	sort.Slice(c.Calls, func(i, j int) bool {
		a, b := c.Calls[i], c.Calls[j]
		if a.EndpointRef != b.EndpointRef {
			return a.Endpoint+"\x00"+a.Model < b.Endpoint+"\x00"+b.Model
		}
		return a.Outcome < b.Outcome
	})
	sort.Slice(c.Failovers, func(i, j int) bool {
		a, b := c.Failovers[i], c.Failovers[j]
		return a.From.Endpoint+"\x00"+a.From.Model+"\x00"+a.To.Endpoint+"\x00"+a.To.Model <
			b.From.Endpoint+"\x00"+b.From.Model+"\x00"+b.To.Endpoint+"\x00"+b.To.Model
	})
	return c
}
