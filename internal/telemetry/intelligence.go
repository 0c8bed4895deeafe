package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/api"
)

// Metric names of the intelligence endpoints, for tests and
// docs/observability.md. Their labels are bounded by the configured
// endpoints: endpoint (a base URL, which never holds a credential) and model.
const (
	MetricIntelligenceCalls     = "agent_intelligence_calls_total"
	MetricIntelligenceFailovers = "agent_intelligence_failovers_total"
	MetricIntelligenceBreaker   = "agent_intelligence_breaker_state"
)

// IntelligenceMetrics are the model endpoints' figures as the children
// reported them to the supervisor.
type IntelligenceMetrics struct {
	Calls     []IntelligenceCall
	Failovers []IntelligenceFailover
	Breakers  []api.EndpointBreaker
}

// IntelligenceCall is the count of one endpoint's calls that ended with one
// outcome (api.Call*).
type IntelligenceCall struct {
	Endpoint, Model, Outcome string
	N                        int64
}

// IntelligenceFailover is the count of calls that passed from one endpoint
// to another.
type IntelligenceFailover struct {
	Endpoint, Model, ToEndpoint, ToModel string
	N                                    int64
}

// BreakerStateValue is the gauge value of a breaker state: 0 closed, 1
// half-open, 2 open.
func BreakerStateValue(state string) float64 {
	switch state {
	case api.BreakerOpen:
		return 2
	case api.BreakerHalfOpen:
		return 1
	}
	return 0
}

var intelDescs = sync.OnceValue(func() [3]*prometheus.Desc {
	return [3]*prometheus.Desc{
		prometheus.NewDesc(MetricIntelligenceCalls, "Model calls by endpoint, model and outcome (ok, rate_limited, server_error, client_error, timeout, unreachable, bad_answer, error), each after its retries, as subagents reported them.", []string{"endpoint", "model", "outcome"}, nil),
		prometheus.NewDesc(MetricIntelligenceFailovers, "Model calls passed from one endpoint (its breaker open, or the call failed) to the next.", []string{"endpoint", "model", "to_endpoint", "to_model"}, nil),
		prometheus.NewDesc(MetricIntelligenceBreaker, "The service-wide state of each endpoint's breaker: 0 closed, 1 half-open, 2 open.", []string{"endpoint", "model"}, nil),
	}
})

// ObserveIntelligence registers a collector that reads src at every scrape.
func (m *Metrics) ObserveIntelligence(src func() IntelligenceMetrics) {
	m.reg.MustRegister(intelCollector(src))
}

type intelCollector func() IntelligenceMetrics

func (c intelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range intelDescs() {
		ch <- d
	}
}

func (c intelCollector) Collect(ch chan<- prometheus.Metric) {
	ds := intelDescs()
	im := c()
	for _, x := range im.Calls {
		ch <- prometheus.MustNewConstMetric(ds[0], prometheus.CounterValue, float64(x.N), x.Endpoint, x.Model, x.Outcome)
	}
	for _, x := range im.Failovers {
		ch <- prometheus.MustNewConstMetric(ds[1], prometheus.CounterValue, float64(x.N), x.Endpoint, x.Model, x.ToEndpoint, x.ToModel)
	}
	for _, b := range im.Breakers {
		ch <- prometheus.MustNewConstMetric(ds[2], prometheus.GaugeValue, BreakerStateValue(b.State), b.Endpoint, b.Model)
	}
}
