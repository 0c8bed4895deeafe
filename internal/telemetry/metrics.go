package telemetry

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is agentd's Prometheus registry: the Go runtime and process
// collectors, the A2A request counters and latency histogram (counted by
// ServeA2A), and the collector that reads the supervisor's and the task
// engine's own counters at scrape time (Observe). Every name starts with
// agent_ and every label is bounded (method, code, provider, reason, cause,
// state, rung, direction), never a task id or a pid. It is safe for concurrent
// use; create it with NewMetrics. A nil *Metrics counts nothing.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Metric names, for tests and docs/observability.md.
const (
	MetricA2ARequests   = "agent_a2a_requests_total"
	MetricA2ADuration   = "agent_a2a_request_duration_seconds"
	MetricSubagentsLive = "agent_subagents_live"
	MetricSpawns        = "agent_spawns_total"
	MetricSpawnRefusals = "agent_spawn_refusals_total"
	MetricVerdicts      = "agent_detector_verdicts_total"
	MetricLadderRungs   = "agent_kill_ladder_rungs_total"
	MetricUnreaped      = "agent_unreaped_total"
	MetricOrphans       = "agent_orphans_reaped_total"
	MetricPings         = "agent_pings_total"
	MetricPongs         = "agent_pongs_total"
	MetricBreakersOpen  = "agent_governor_breakers_open"
	MetricTokens        = "agent_tokens_total"
	MetricTasks         = "agent_tasks"
	MetricTasksInFlight = "agent_tasks_in_flight"
	MetricHeartbeatAge  = "agent_heartbeat_age_seconds"

	MetricAdmissionRuns       = "agent_admission_runs"
	MetricAdmissionMaxRuns    = "agent_admission_max_live_runs"
	MetricAdmissionSlots      = "agent_admission_live_subagents"
	MetricAdmissionMaxSlots   = "agent_admission_max_live_subagents"
	MetricAdmissionQueued     = "agent_admission_queued"
	MetricAdmissionQueueCap   = "agent_admission_queue_capacity"
	MetricAdmissionShed       = "agent_admission_shed_total"
	MetricAdmissionAdmitted   = "agent_admission_admitted_total"
	MetricAdmissionRefused    = "agent_admission_refused_total"
	MetricAdmissionRetryAfter = "agent_admission_retry_after_seconds"
	MetricSubagentProcesses   = "agent_subagent_processes"
	MetricAdmissionCancelled  = "agent_admission_cancelled_total"
	MetricAdmissionCallers    = "agent_admission_callers"
	MetricAdmissionMemory     = "agent_admission_memory_bytes"
	MetricAdmissionBeyond     = "agent_admission_beyond_total"
)

// NewMetrics returns a registry with the Go runtime and process collectors
// and the A2A request metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricA2ARequests,
			Help: "A2A JSON-RPC requests served, by method (unknown for a method this service does not have, none when the request was refused before one was read) and code (ok, the JSON-RPC error code, or http_STATUS for a refusal before JSON-RPC).",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricA2ADuration,
			Help:    "Time from an A2A request's arrival to its last byte, by method; a blocking message/send or a stream lasts as long as its task.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900},
		}, []string{"method"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration,
	)
	return m
}

// Registry returns the underlying registry, for registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveRequest counts one A2A request.
func (m *Metrics) ObserveRequest(method, code string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(method, code).Inc()
	m.duration.WithLabelValues(method).Observe(d.Seconds())
}

// SupervisorCounts are the supervisor's counters as the metrics read them.
type SupervisorCounts struct {
	Spawns   map[string]int64 // subagents started, by provider
	Refusals map[string]int64 // spawn refusals at the chokepoint, by reason
	Verdicts map[string]int64 // the supervisor's verdicts, by cause
	// The kill ladder's rungs: ctrl/cancel frames, SIGTERMs and SIGKILLs sent.
	Cancels, Terms, Kills int64
	Unreaped              int64 // processes that would not reap in their kill budget
	Orphans               int64 // reparented processes reaped
	Pings, Pongs          int64 // liveness frames sent and answered
	TokensIn, TokensOut   int64 // tokens used, as loop events reported them
}

// Sources are read at every scrape; each may be nil.
type Sources struct {
	Supervisor   func() SupervisorCounts
	Live         func() map[string]int  // live subagents by state
	BreakersOpen func() int             // restart-governor breakers open
	Tasks        func() map[string]int  // stored A2A tasks by state
	InFlight     func() int             // A2A tasks whose executor is running
	HeartbeatAge func() time.Duration   // since the supervisor's last heartbeat
	Admission    func() AdmissionGauges // the service's admission control
}

// AdmissionGauges are the admission control's figures as the metrics read
// them.
type AdmissionGauges struct {
	Runs, MaxRuns       int              // runs holding a slot, and the bound
	Slots, MaxSlots     int              // process slots in use (runs' roots and nested subagents), and the bound
	Processes           int              // subagent processes alive now
	Queued              map[string]int   // queued runs by priority (low, normal, high)
	QueueCapacity       int              // the queue's bound
	Callers             int              // callers with a run running or queued
	Admitted, Cancelled int64            // runs dispatched; runs that left the queue without running
	Refused             int64            // nested spawns refused for want of a process slot
	Shed                map[string]int64 // requests shed (HTTP 429), by reason
	RetryAfter          time.Duration    // the hint a request shed now would get
	// Memory is the memory gate's figures in bytes, by kind (limit,
	// in_use, self, reserved, held, estimate, fresh, measured, headroom);
	// nil when the gate is off.
	Memory map[string]uint64
	Beyond int64 // runs and nested subagents admitted past the count bounds
}

// Observe registers a collector that reads src at every scrape, so the
// counters are the supervisor's and the engine's own, never a second copy.
func (m *Metrics) Observe(src Sources) {
	m.reg.MustRegister(&sourceCollector{src: src})
}

// metricDescs are the descriptions of the metrics sourceCollector reads.
type metricDescs struct {
	descLive          *prometheus.Desc
	descSpawns        *prometheus.Desc
	descRefusals      *prometheus.Desc
	descVerdicts      *prometheus.Desc
	descRungs         *prometheus.Desc
	descUnreaped      *prometheus.Desc
	descOrphans       *prometheus.Desc
	descPings         *prometheus.Desc
	descPongs         *prometheus.Desc
	descBreakers      *prometheus.Desc
	descTokens        *prometheus.Desc
	descTasks         *prometheus.Desc
	descInFlight      *prometheus.Desc
	descHeartbeat     *prometheus.Desc
	descAdmRuns       *prometheus.Desc
	descAdmMaxRuns    *prometheus.Desc
	descAdmSlots      *prometheus.Desc
	descAdmMaxSlots   *prometheus.Desc
	descProcesses     *prometheus.Desc
	descAdmQueued     *prometheus.Desc
	descAdmQueueCap   *prometheus.Desc
	descAdmCallers    *prometheus.Desc
	descAdmShed       *prometheus.Desc
	descAdmAdmitted   *prometheus.Desc
	descAdmCancelled  *prometheus.Desc
	descAdmRefused    *prometheus.Desc
	descAdmRetryAfter *prometheus.Desc
	descAdmMemory     *prometheus.Desc
	descAdmBeyond     *prometheus.Desc
}

// descs builds the descriptions on first use rather than in package init:
// every process runs the init of every package it links, each subagent
// included, and a subagent never serves metrics.
var descs = sync.OnceValue(func() *metricDescs {
	return &metricDescs{
		descLive:          prometheus.NewDesc(MetricSubagentsLive, "Subagents alive now, by state (starting, running, stopping).", []string{"state"}, nil),
		descSpawns:        prometheus.NewDesc(MetricSpawns, "Subagents started, by provider (local, or peer:NAME for a delegation to a remote peer).", []string{"provider"}, nil),
		descRefusals:      prometheus.NewDesc(MetricSpawnRefusals, "subagent.spawn requests refused at the chokepoint, by reason.", []string{"reason"}, nil),
		descVerdicts:      prometheus.NewDesc(MetricVerdicts, "The supervisor's verdicts on a subagent it stopped, by cause (deadline, no_progress, pong_timeout, protocol_violation, spawn_timeout, exited_without_result, cancelled, ...).", []string{"cause"}, nil),
		descRungs:         prometheus.NewDesc(MetricLadderRungs, "Kill-ladder rungs taken: ctrl/cancel frames, SIGTERMs and SIGKILLs sent to a subagent's process group.", []string{"rung"}, nil),
		descUnreaped:      prometheus.NewDesc(MetricUnreaped, "Processes that did not reap within their kill budget.", nil, nil),
		descOrphans:       prometheus.NewDesc(MetricOrphans, "Reparented (orphaned) processes this supervisor reaped.", nil, nil),
		descPings:         prometheus.NewDesc(MetricPings, "ctrl/ping frames sent to subagents.", nil, nil),
		descPongs:         prometheus.NewDesc(MetricPongs, "ctrl/pong frames received in answer.", nil, nil),
		descBreakers:      prometheus.NewDesc(MetricBreakersOpen, "Restart-governor circuit breakers open now.", nil, nil),
		descTokens:        prometheus.NewDesc(MetricTokens, "Tokens used by subagents, by direction (in, out).", []string{"direction"}, nil),
		descTasks:         prometheus.NewDesc(MetricTasks, "A2A tasks held by the task store, by state.", []string{"state"}, nil),
		descInFlight:      prometheus.NewDesc(MetricTasksInFlight, "A2A tasks whose executor is running.", nil, nil),
		descHeartbeat:     prometheus.NewDesc(MetricHeartbeatAge, "Seconds since the supervisor's last heartbeat (/healthz fails when it is too old).", nil, nil),
		descAdmRuns:       prometheus.NewDesc(MetricAdmissionRuns, "Runs (live subagent trees) holding an admission slot.", nil, nil),
		descAdmMaxRuns:    prometheus.NewDesc(MetricAdmissionMaxRuns, "The bound on runs at once (--max-live-runs).", nil, nil),
		descAdmSlots:      prometheus.NewDesc(MetricAdmissionSlots, "Process slots in use across the service: one per run's root, one per nested local subagent.", nil, nil),
		descAdmMaxSlots:   prometheus.NewDesc(MetricAdmissionMaxSlots, "The bound on live subagent processes across the service (--max-live-subagents).", nil, nil),
		descProcesses:     prometheus.NewDesc(MetricSubagentProcesses, "Subagent processes alive now (never more than the process slots in use).", nil, nil),
		descAdmQueued:     prometheus.NewDesc(MetricAdmissionQueued, "Runs waiting in the admission queue, by priority.", []string{"priority"}, nil),
		descAdmQueueCap:   prometheus.NewDesc(MetricAdmissionQueueCap, "The admission queue's bound (--queue-capacity).", nil, nil),
		descAdmCallers:    prometheus.NewDesc(MetricAdmissionCallers, "Callers with a run running or queued.", nil, nil),
		descAdmShed:       prometheus.NewDesc(MetricAdmissionShed, "Requests shed past the admission queue (HTTP 429 with Retry-After), by reason (queue_full, caller_queue_full, closed).", []string{"reason"}, nil),
		descAdmAdmitted:   prometheus.NewDesc(MetricAdmissionAdmitted, "Runs admission dispatched.", nil, nil),
		descAdmCancelled:  prometheus.NewDesc(MetricAdmissionCancelled, "Runs that left the admission queue without running (cancelled, or drained).", nil, nil),
		descAdmRefused:    prometheus.NewDesc(MetricAdmissionRefused, "Nested spawns refused because the service's process bound was reached.", nil, nil),
		descAdmRetryAfter: prometheus.NewDesc(MetricAdmissionRetryAfter, "The retry-after hint a request shed now would get.", nil, nil),
		descAdmMemory:     prometheus.NewDesc(MetricAdmissionMemory, "The memory gate, in bytes, by kind: limit, in_use (the last sample), self (the supervisor's RSS), reserved (the runs' and nested subagents'), held (the front's, for bodies being read), estimate (what admission within the bounds counts as taken), fresh (reserved since the sample before the last), measured (in_use + fresh + held: what admission past the bounds counts), headroom (left free past the bounds).", []string{"kind"}, nil),
		descAdmBeyond:     prometheus.NewDesc(MetricAdmissionBeyond, "Runs and nested subagents admitted past the count bounds because the memory measured left room.", nil, nil),
	}
})

// admission is the admission metrics' descriptions, for Describe.
func (d *metricDescs) admission() []*prometheus.Desc {
	return []*prometheus.Desc{d.descAdmRuns, d.descAdmMaxRuns, d.descAdmSlots, d.descAdmMaxSlots, d.descProcesses, d.descAdmQueued, d.descAdmQueueCap, d.descAdmCallers, d.descAdmShed, d.descAdmAdmitted, d.descAdmCancelled, d.descAdmRefused, d.descAdmRetryAfter, d.descAdmMemory, d.descAdmBeyond}
}

// sourceCollector turns Sources into metrics at scrape time.
type sourceCollector struct{ src Sources }

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ds := descs()
	for _, d := range []*prometheus.Desc{ds.descLive, ds.descSpawns, ds.descRefusals, ds.descVerdicts, ds.descRungs, ds.descUnreaped,
		ds.descOrphans, ds.descPings, ds.descPongs, ds.descBreakers, ds.descTokens, ds.descTasks, ds.descInFlight, ds.descHeartbeat} {
		ch <- d
	}
	if c.src.Admission != nil {
		for _, d := range ds.admission() {
			ch <- d
		}
	}
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ds := descs()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if f := c.src.Supervisor; f != nil {
		s := f()
		for _, k := range sortedKeys(s.Spawns) {
			counter(ds.descSpawns, s.Spawns[k], k)
		}
		for _, k := range sortedKeys(s.Refusals) {
			counter(ds.descRefusals, s.Refusals[k], k)
		}
		for _, k := range sortedKeys(s.Verdicts) {
			counter(ds.descVerdicts, s.Verdicts[k], k)
		}
		counter(ds.descRungs, s.Cancels, "cancel")
		counter(ds.descRungs, s.Terms, "sigterm")
		counter(ds.descRungs, s.Kills, "sigkill")
		counter(ds.descUnreaped, s.Unreaped)
		counter(ds.descOrphans, s.Orphans)
		counter(ds.descPings, s.Pings)
		counter(ds.descPongs, s.Pongs)
		counter(ds.descTokens, s.TokensIn, "in")
		counter(ds.descTokens, s.TokensOut, "out")
	}
	if f := c.src.Live; f != nil {
		live := f()
		for _, k := range sortedKeys(live) {
			gauge(ds.descLive, float64(live[k]), k)
		}
	}
	if f := c.src.BreakersOpen; f != nil {
		gauge(ds.descBreakers, float64(f()))
	}
	if f := c.src.Tasks; f != nil {
		tasks := f()
		for _, k := range sortedKeys(tasks) {
			gauge(ds.descTasks, float64(tasks[k]), k)
		}
	}
	if f := c.src.InFlight; f != nil {
		gauge(ds.descInFlight, float64(f()))
	}
	if f := c.src.HeartbeatAge; f != nil {
		gauge(ds.descHeartbeat, f().Seconds())
	}
	if f := c.src.Admission; f != nil {
		a := f()
		gauge(ds.descAdmRuns, float64(a.Runs))
		gauge(ds.descAdmMaxRuns, float64(a.MaxRuns))
		gauge(ds.descAdmSlots, float64(a.Slots))
		gauge(ds.descAdmMaxSlots, float64(a.MaxSlots))
		gauge(ds.descProcesses, float64(a.Processes))
		for _, k := range sortedKeys(a.Queued) {
			gauge(ds.descAdmQueued, float64(a.Queued[k]), k)
		}
		gauge(ds.descAdmQueueCap, float64(a.QueueCapacity))
		gauge(ds.descAdmCallers, float64(a.Callers))
		for _, k := range sortedKeys(a.Shed) {
			counter(ds.descAdmShed, a.Shed[k], k)
		}
		counter(ds.descAdmAdmitted, a.Admitted)
		counter(ds.descAdmCancelled, a.Cancelled)
		counter(ds.descAdmRefused, a.Refused)
		gauge(ds.descAdmRetryAfter, a.RetryAfter.Seconds())
		for _, k := range sortedKeys(a.Memory) {
			gauge(ds.descAdmMemory, float64(a.Memory[k]), k)
		}
		counter(ds.descAdmBeyond, a.Beyond)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CodeLabel is the code label of an A2A request: "ok", the JSON-RPC error
// code, or http_STATUS for a request refused before JSON-RPC (401, 403, 413).
func CodeLabel(rpcCode int, rpcSet bool, httpStatus int) string {
	switch {
	case rpcSet && rpcCode != 0:
		return strconv.Itoa(rpcCode)
	case rpcSet:
		return "ok"
	case httpStatus >= 400:
		return "http_" + strconv.Itoa(httpStatus)
	}
	return "ok"
}
