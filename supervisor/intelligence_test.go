package supervisor

import (
	"log/slog"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// The service-wide view takes reports about a child's own endpoints only,
// counts calls and failovers, keeps the latest breaker state, and hands the
// non-closed ones on.
func TestIntelViewNote(t *testing.T) {
	spec := api.Intelligence{Endpoint: "http://a/v1", Model: "m", Fallbacks: []api.Intelligence{{Endpoint: "http://b/v1", Model: "n"}}}
	s := &Supervisor{}
	log := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := api.EndpointRef{Endpoint: "http://b/v1", Model: "n"}
	for _, r := range []api.IntelligenceReport{
		{Endpoint: "http://a/v1", Model: "m", Outcome: api.CallServerError},
		{Endpoint: "http://a/v1", Model: "m", FailoverTo: &b},
		{Endpoint: "http://b/v1", Model: "n", Outcome: api.CallOK},
		{Endpoint: "http://a/v1", Model: "m", Breaker: &api.EndpointBreaker{Endpoint: "http://a/v1", Model: "m", State: api.BreakerOpen, Since: t0, Until: t0.Add(time.Hour)}},
		// An older change than the one held: ignored.
		{Endpoint: "http://a/v1", Model: "m", Breaker: &api.EndpointBreaker{Endpoint: "http://a/v1", Model: "m", State: api.BreakerClosed, Since: t0.Add(-time.Minute)}},
		// Not the child's: dropped.
		{Endpoint: "http://evil/v1", Model: "m", Outcome: api.CallOK},
		{Endpoint: "http://a/v1", Model: "other", Outcome: api.CallOK},
		{Endpoint: "http://a/v1", Model: "m", FailoverTo: &api.EndpointRef{Endpoint: "http://evil/v1"}},
		{Endpoint: "http://a/v1", Model: "m", Outcome: "made_up"},
		{Endpoint: "http://a/v1", Model: "m", Breaker: &api.EndpointBreaker{Endpoint: "http://b/v1", Model: "n", State: api.BreakerOpen}},
	} {
		s.intel.note(spec, r, log)
	}
	c := s.IntelligenceCounts()
	if len(c.Calls) != 2 || c.Calls[0].Outcome != api.CallServerError || c.Calls[1].Outcome != api.CallOK || c.Calls[1].Endpoint != "http://b/v1" {
		t.Fatalf("calls %+v", c.Calls)
	}
	if len(c.Failovers) != 1 || c.Failovers[0].N != 1 || c.Failovers[0].To != b {
		t.Fatalf("failovers %+v", c.Failovers)
	}
	got := s.intel.breakersFor(spec)
	if len(got) != 1 || got[0].Endpoint != "http://a/v1" || got[0].State != api.BreakerOpen {
		t.Fatalf("handed on %+v; want a's open breaker alone", got)
	}
	all := s.IntelligenceBreakers()
	if len(all) != 2 || all[0].State != api.BreakerHalfOpen || all[1].State != api.BreakerClosed {
		t.Fatalf("breakers %+v; want a half-open (its hour has passed), b closed", all)
	}
}
