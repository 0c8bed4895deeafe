package intelligence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// failoverModel is an intelligence of several endpoints, tried in order, each
// behind its own breaker (breaker.go): a call goes to the first endpoint whose
// breaker lets it, and a call that fails there goes on to the next. Each
// endpoint retries as its own settings say (openai.go) before the call moves
// on. Every failed call, failover and breaker change is logged at warn with
// the endpoint (its URL, which holds no credential, and its model; never a
// key) and reported upward (SetReporter), where the supervisor counts it and
// keeps the service-wide state it hands to the next child. It is used by one
// loop at a time.
type failoverModel struct {
	eps    []*endpoint
	log    *slog.Logger                 // set by SetLogger; discards until then
	report func(api.IntelligenceReport) // set by SetReporter; nil reports nothing
}

// endpoint is one endpoint of a failoverModel.
type endpoint struct {
	ref   api.EndpointRef
	model Model
	br    *breaker
}

// newFailover builds the endpoints of spec, each with its key: the first's is
// key unless it names a KeyEnv; a fallback's is its KeyEnv's value (none
// without one). The breakers start from spec.Breakers.
func newFailover(spec api.Intelligence, key string, now func() time.Time) (*failoverModel, error) {
	m := &failoverModel{log: slog.New(slog.DiscardHandler)}
	for i, e := range spec.Endpoints() {
		k := ""
		switch {
		case e.KeyEnv != "":
			k = os.Getenv(e.KeyEnv)
		case i == 0:
			k = key
		}
		model, err := newEndpoint(e, k)
		if err != nil {
			if i > 0 {
				return nil, fmt.Errorf("fallback %d: %w", i, err)
			}
			return nil, err
		}
		ep := &endpoint{ref: e.Ref(), model: model, br: newBreaker(e.Ref(), e.Breaker, now)}
		for _, b := range spec.Breakers {
			if (api.EndpointRef{Endpoint: b.Endpoint, Model: b.Model}) == ep.ref {
				ep.br.adopt(b)
			}
		}
		m.eps = append(m.eps, ep)
	}
	return m, nil
}

// SetLogger gives the model and each endpoint's the subagent's logger.
func (m *failoverModel) SetLogger(l *slog.Logger, content bool) {
	m.log = l
	for _, ep := range m.eps {
		if s, ok := ep.model.(interface{ SetLogger(*slog.Logger, bool) }); ok {
			s.SetLogger(l, content)
		}
	}
}

// SetReporter makes the model report each call's outcome, each failover and
// each breaker change to r, from Complete's goroutine; r must not block.
func (m *failoverModel) SetReporter(r func(api.IntelligenceReport)) { m.report = r }

// Breakers returns the state of every endpoint's breaker, in order.
func (m *failoverModel) Breakers() []api.EndpointBreaker {
	out := make([]api.EndpointBreaker, len(m.eps))
	for i, ep := range m.eps {
		out[i] = ep.br.snapshot()
	}
	return out
}

// Complete sends req to the first endpoint whose breaker lets it, and to the
// next on a failure, unless the failed endpoint had already streamed text
// to req.OnText. With one endpoint, its error is returned as it is; with
// more, an error names each endpoint's failure. Either way, when no endpoint
// was tried because every breaker is open, or every endpoint failed in a way
// an outage explains (unreachable, timed out, 429, 5xx, not a completion),
// the error wraps ErrUnreachable (cause intelligence_unreachable).
func (m *failoverModel) Complete(ctx context.Context, req *Request) (*Response, error) {
	var (
		failed  []string
		last    error
		passed  *endpoint // the last endpoint passed over
		outage  = true
		skipped = 0
	)
	for _, ep := range m.eps {
		ok, change := ep.br.allow()
		m.changed(ep, change)
		if !ok {
			st := ep.br.snapshot()
			failed = append(failed, fmt.Sprintf("%s: breaker %s until %s after %d failures (last: %s)", ep.name(), st.State, st.Until.UTC().Format(time.RFC3339Nano), st.Failures, st.LastError))
			passed = ep
			skipped++
			continue
		}
		if passed != nil {
			m.failover(passed, ep)
		}
		r, streamed := req, false
		if req.OnText != nil {
			// Text already streamed to the caller cannot be taken back: a
			// call that fails after some is not failed over, or the next
			// endpoint's answer would follow the first one's part.
			cp := *req
			cp.OnText = func(chunk string) { streamed = true; req.OnText(chunk) }
			r = &cp
		}
		resp, err := ep.model.Complete(ctx, r)
		if err == nil {
			m.call(ep, api.CallOK, nil)
			m.changed(ep, ep.br.success())
			if resp.Endpoint == "" {
				resp.Endpoint = ep.name()
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			ep.br.release()
			return nil, err
		}
		outcome := classify(err)
		m.call(ep, outcome, err)
		retryAfter, _ := retryAfterOf(err)
		m.changed(ep, ep.br.failure(err, retryAfter))
		if outcome == api.CallClientError || outcome == api.CallError {
			outage = false
		}
		failed = append(failed, ep.name()+": "+err.Error())
		last, passed = err, ep
		if streamed {
			if len(m.eps) == 1 {
				return nil, err
			}
			return nil, fmt.Errorf("agent: intelligence endpoint %s failed after streaming part of its answer (not failed over): %w", ep.name(), err)
		}
	}
	if len(m.eps) == 1 && last != nil {
		return nil, last
	}
	if skipped == len(m.eps) {
		return nil, fmt.Errorf("%w: every endpoint's breaker is open: %s", ErrUnreachable, strings.Join(failed, "; "))
	}
	if outage {
		return nil, fmt.Errorf("%w: every endpoint failed: %s", ErrUnreachable, strings.Join(failed, "; "))
	}
	return nil, fmt.Errorf("agent: every intelligence endpoint failed: %s", strings.Join(failed, "; "))
}

// name is how logs and errors name the endpoint.
func (ep *endpoint) name() string {
	if ep.ref.Model == "" {
		return ep.ref.Endpoint
	}
	return ep.ref.Endpoint + " (model " + ep.ref.Model + ")"
}

// call reports a call's outcome (a failure is logged by the endpoint's own
// model, with its retries).
func (m *failoverModel) call(ep *endpoint, outcome string, err error) {
	if err != nil && len(m.eps) > 1 {
		m.log.Warn("intelligence endpoint failed", "endpoint", ep.ref.Endpoint, "model", ep.ref.Model, "outcome", outcome, "err", err)
	}
	m.send(api.IntelligenceReport{Endpoint: ep.ref.Endpoint, Model: ep.ref.Model, Outcome: outcome})
}

// failover logs and reports that a call passed from one endpoint to the next.
func (m *failoverModel) failover(from, to *endpoint) {
	m.log.Warn("intelligence failover", "endpoint", from.ref.Endpoint, "model", from.ref.Model, "to_endpoint", to.ref.Endpoint, "to_model", to.ref.Model)
	ref := to.ref
	m.send(api.IntelligenceReport{Endpoint: from.ref.Endpoint, Model: from.ref.Model, FailoverTo: &ref})
}

// changed logs and reports a breaker change (nil: none).
func (m *failoverModel) changed(ep *endpoint, st *api.EndpointBreaker) {
	if st == nil {
		return
	}
	attrs := []any{"endpoint", ep.ref.Endpoint, "model", ep.ref.Model, "state", st.State, "failures", st.Failures}
	if st.State == api.BreakerOpen {
		attrs = append(attrs, "until", st.Until.UTC().Format(time.RFC3339Nano), "err", st.LastError)
	}
	m.log.Warn("intelligence breaker "+st.State, attrs...)
	m.send(api.IntelligenceReport{Endpoint: ep.ref.Endpoint, Model: ep.ref.Model, Breaker: st})
}

func (m *failoverModel) send(r api.IntelligenceReport) {
	if m.report != nil {
		m.report(r)
	}
}

// answerError is an answer that is not a completion: a body that is not
// JSON, or one without choices. Its text is its cause's.
type answerError struct{ err error }

func (e *answerError) Error() string { return e.err.Error() }
func (e *answerError) Unwrap() error { return e.err }

// finalStatusError is the error that ends a call on an HTTP status: its
// text says how many attempts were made, and it keeps the last answer (its
// status and Retry-After) for the breaker.
type finalStatusError struct {
	text   string
	status *httpStatusError
}

func (e *finalStatusError) Error() string { return e.text }
func (e *finalStatusError) Unwrap() error { return e.status }

// classify names a failed call's outcome (api.Call*).
func classify(err error) string {
	var se *httpStatusError
	var ae *answerError
	var syn *json.SyntaxError
	var cse *streamEventError
	var mse *streamError
	switch {
	case errors.As(err, &cse):
		return api.CallServerError
	case errors.As(err, &mse):
		switch {
		case mse.typ == "rate_limit_error":
			return api.CallRateLimited
		case mse.retryable():
			return api.CallServerError
		}
		return api.CallClientError
	case errors.Is(err, ErrStreamCut):
		return api.CallBadAnswer
	case errors.As(err, &se):
		switch s := se.status; {
		case s == http.StatusTooManyRequests:
			return api.CallRateLimited
		case s >= 500, s == http.StatusRequestTimeout, s == http.StatusConflict:
			return api.CallServerError
		default:
			return api.CallClientError
		}
	case errors.Is(err, ErrUnreachable), isUnreachable(err):
		return api.CallUnreachable
	case errors.Is(err, context.DeadlineExceeded):
		return api.CallTimeout
	case errors.As(err, &ae), errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		return api.CallBadAnswer
	}
	return api.CallError
}

// retryAfterOf is the wait the endpoint's last answer asked for, if any.
func retryAfterOf(err error) (time.Duration, bool) {
	var se *httpStatusError
	if !errors.As(err, &se) {
		return 0, false
	}
	return parseRetryAfter(se.header, time.Now())
}
