package api

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Failover between intelligence endpoints: an Intelligence is its own
// endpoint followed by its Fallbacks, each with a circuit breaker in every
// child process. A child reports each call's outcome, each failover and each
// breaker change upward (MethodIntelligence); the supervisor counts them,
// keeps the service-wide state of every endpoint's breaker and hands it to
// every child it spawns (Intelligence.Breakers). The supervisor never calls a
// model.

// MethodIntelligence is the upward notification a child sends about its
// model endpoints: params IntelligenceReport.
const MethodIntelligence = "intelligence/report"

// Defaults of an endpoint's circuit breaker.
const (
	DefaultBreakerFailures = 3
	DefaultBreakerCoolDown = 30 * time.Second
	// MaxBreakerFailures bounds BreakerPolicy.Failures.
	MaxBreakerFailures = 1000
	// MaxFallbacks bounds Intelligence.Fallbacks.
	MaxFallbacks = 8
)

// BreakerPolicy is the policy of every endpoint's breaker: it opens after
// Failures failed calls in a row (each call already retried as the endpoint's
// Retries say), stays open for CoolDown (or the endpoint's Retry-After when
// longer), then half-opens for one trial call, which closes it on success
// and re-opens it on failure. The zero value of a field is its default.
type BreakerPolicy struct {
	Failures int      `json:"failures,omitempty"`
	CoolDown Duration `json:"cool_down,omitempty"`
}

// Threshold returns the failures in a row that open a breaker.
func (b BreakerPolicy) Threshold() int {
	if b.Failures > 0 {
		return b.Failures
	}
	return DefaultBreakerFailures
}

// Cool returns the cool-down of an open breaker.
func (b BreakerPolicy) Cool() time.Duration {
	if b.CoolDown > 0 {
		return b.CoolDown.D()
	}
	return DefaultBreakerCoolDown
}

// EndpointBreaker is the state of one endpoint's breaker: in a child's
// report of a change, in the supervisor's service-wide view, and in a spawn
// payload.
type EndpointBreaker struct {
	// Endpoint is the base URL (never with credentials) and Model the model:
	// together they name the endpoint.
	Endpoint string `json:"endpoint"`
	Model    string `json:"model,omitempty"`
	// State is BreakerClosed, BreakerOpen or BreakerHalfOpen.
	State string `json:"state"`
	// Since is when State began.
	Since time.Time `json:"since"`
	// Until is, while open, when it half-opens.
	Until time.Time `json:"until,omitzero"`
	// Failures is the failed calls in a row.
	Failures int `json:"failures,omitempty"`
	// LastError is the last failure's error (never a key).
	LastError string `json:"last_error,omitempty"`
}

// Call outcomes, as IntelligenceReport.Outcome and the metrics name them.
const (
	CallOK          = "ok"
	CallRateLimited = "rate_limited" // 429
	CallServerError = "server_error" // 5xx, 408, 409
	CallClientError = "client_error" // another 4xx
	CallTimeout     = "timeout"      // no answer within the request timeout
	CallUnreachable = "unreachable"  // a failed dial or DNS lookup
	CallBadAnswer   = "bad_answer"   // an answer that is not a completion
	CallError       = "error"        // anything else
)

// CallOutcomes lists the call outcomes.
var CallOutcomes = []string{CallOK, CallRateLimited, CallServerError, CallClientError, CallTimeout, CallUnreachable, CallBadAnswer, CallError}

// IntelligenceReport is one thing a child tells the supervisor about its
// endpoints: a call's outcome (Outcome set), a failover from Endpoint to
// FailoverTo (set), or a breaker change (Breaker set, for Endpoint).
type IntelligenceReport struct {
	Endpoint   string           `json:"endpoint"`
	Model      string           `json:"model,omitempty"`
	Outcome    string           `json:"outcome,omitempty"`
	FailoverTo *EndpointRef     `json:"failover_to,omitempty"`
	Breaker    *EndpointBreaker `json:"breaker,omitempty"`
}

// EndpointRef names an endpoint: its base URL and model.
type EndpointRef struct {
	Endpoint string `json:"endpoint"`
	Model    string `json:"model,omitempty"`
}

// Ref returns the intelligence's own endpoint as a ref.
func (i Intelligence) Ref() EndpointRef { return EndpointRef{Endpoint: i.Endpoint, Model: i.Model} }

// Endpoints returns the endpoints in the order calls try them: the
// intelligence's own, then its fallbacks, each with the shared breaker
// policy and no fallbacks or breaker state of its own.
func (i Intelligence) Endpoints() []Intelligence {
	out := make([]Intelligence, 0, 1+len(i.Fallbacks))
	first := i
	first.Fallbacks, first.Breakers = nil, nil
	out = append(out, first)
	for _, f := range i.Fallbacks {
		f.Fallbacks, f.Breakers, f.Breaker = nil, nil, i.Breaker
		out = append(out, f)
	}
	return out
}

// Holds reports whether ref names one of the intelligence's endpoints.
func (i Intelligence) Holds(ref EndpointRef) bool {
	for _, e := range i.Endpoints() {
		if e.Ref() == ref {
			return true
		}
	}
	return false
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validateFailover checks the fallbacks, the breaker policy and the breaker
// state.
func (i Intelligence) validateFailover() error {
	if i.KeyEnv != "" && !envName.MatchString(i.KeyEnv) {
		return fmt.Errorf("intelligence.key_env %q is not an environment variable name", i.KeyEnv)
	}
	if i.Breaker.Failures < 0 || i.Breaker.Failures > MaxBreakerFailures {
		return fmt.Errorf("intelligence.breaker.failures must be in [0, %d]", MaxBreakerFailures)
	}
	if i.Breaker.CoolDown < 0 || i.Breaker.CoolDown.D() > MaxDeadline {
		return fmt.Errorf("intelligence.breaker.cool_down must be in [0, %s]", MaxDeadline)
	}
	if len(i.Fallbacks) > MaxFallbacks {
		return fmt.Errorf("intelligence.fallbacks: at most %d", MaxFallbacks)
	}
	seen := map[EndpointRef]bool{i.Ref(): true}
	for n, f := range i.Fallbacks {
		if len(f.Fallbacks) > 0 || len(f.Breakers) > 0 {
			return fmt.Errorf("intelligence.fallbacks[%d]: a fallback has no fallbacks or breakers of its own", n)
		}
		if err := f.Validate(); err != nil {
			return fmt.Errorf("intelligence.fallbacks[%d]: %w", n, err)
		}
		if seen[f.Ref()] {
			return fmt.Errorf("intelligence.fallbacks[%d]: endpoint %s model %q is listed twice", n, f.Endpoint, f.Model)
		}
		seen[f.Ref()] = true
	}
	for n, b := range i.Breakers {
		switch {
		case b.State != BreakerClosed && b.State != BreakerOpen && b.State != BreakerHalfOpen:
			return fmt.Errorf("intelligence.breakers[%d]: unknown state %q", n, b.State)
		case !seen[EndpointRef{Endpoint: b.Endpoint, Model: b.Model}]:
			return fmt.Errorf("intelligence.breakers[%d]: %s is not one of the endpoints", n, b.Endpoint)
		}
	}
	return nil
}

// KeySource says where the supervisor reads an endpoint's API key: the
// environment variable Env or the file File (neither: no key). It is the
// operator's side of the key (a flag's key-env= or key-file=, or a
// configuration file's key_env or key_file beside an endpoint); the
// supervisor reads the key at start and hands it to each child in a variable
// of its own, which the payload names (Intelligence.KeyEnv). The zero value
// is no key.
type KeySource struct {
	Env  string `json:"key_env,omitempty"`
	File string `json:"key_file,omitempty"`
}

// Validate checks that at most one source is named and that Env is a
// variable name.
func (k KeySource) Validate() error {
	switch {
	case k.Env != "" && k.File != "":
		return errors.New("give key_env or key_file, not both")
	case k.Env != "" && !envName.MatchString(k.Env):
		return fmt.Errorf("key_env %q is not an environment variable name", k.Env)
	}
	return nil
}

// ErrBadEndpointSpec is the error of ParseEndpointSpec.
var ErrBadEndpointSpec = errors.New("api: bad endpoint spec")

// ParseEndpointSpec parses one fallback endpoint as a flag gives it: its base
// URL, then comma-separated settings: model=NAME, dialect=openai|anthropic,
// key-env=VAR (the variable holding its API key), key-file=FILE (a file
// holding it), timeout=DURATION, retries=N, backoff=DURATION. For example
// "http://10.0.0.2:8000/v1,model=llama3,key-env=BACKUP_KEY". The key's
// source is returned apart: the caller reads it, and sets the returned
// Intelligence's KeyEnv to the variable it hands the key to children in.
func ParseEndpointSpec(s string) (Intelligence, KeySource, error) {
	var spec Intelligence
	var key KeySource
	bad := func(format string, args ...any) (Intelligence, KeySource, error) {
		return Intelligence{}, KeySource{}, fmt.Errorf("%w %q: %s", ErrBadEndpointSpec, spec.Endpoint, fmt.Sprintf(format, args...))
	}
	parts := strings.Split(s, ",")
	spec.Endpoint = strings.TrimSpace(parts[0])
	if spec.Endpoint == "" {
		return bad("want URL[,model=NAME][,dialect=D][,key-env=VAR|key-file=FILE][,timeout=D][,retries=N][,backoff=D]")
	}
	if u, err := url.Parse(spec.Endpoint); err == nil && u.User != nil {
		spec.Endpoint = u.Redacted()
		return bad("credentials in the URL are refused; use key-env or key-file")
	}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return bad("setting %q: want KEY=VALUE", kv)
		}
		switch k {
		case "model":
			spec.Model = v
		case "dialect":
			if v != DialectOpenAI && v != DialectAnthropic {
				return bad("dialect %q: want %s or %s", v, DialectOpenAI, DialectAnthropic)
			}
			spec.Dialect = v
		case "key-env":
			key.Env = v
		case "key-file":
			key.File = v
		case "timeout", "backoff":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("%s %q: want a positive duration", k, v)
			}
			if k == "timeout" {
				spec.RequestTimeout = Duration(d)
			} else {
				spec.RetryBackoff = Duration(d)
			}
		case "retries":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 20 {
				return bad("retries %q: want 0 to 20", v)
			}
			spec.Retries = &n
		default:
			return bad("unknown setting %q: want model, dialect, key-env, key-file, timeout, retries or backoff", k)
		}
	}
	if err := key.Validate(); err != nil {
		return bad("%s", strings.ReplaceAll(strings.ReplaceAll(err.Error(), "key_env", "key-env"), "key_file", "key-file"))
	}
	return spec, key, nil
}
