package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/secretfile"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/supervisor"
)

// failoverConfig is the intelligence's fallback endpoints and the policy of
// every endpoint's breaker (docs/intelligence.md, "Failover and breakers").
type failoverConfig struct {
	// Fallbacks are the --intelligence-fallback endpoints, in order.
	Fallbacks       []fallback
	BreakerFailures int
	BreakerCoolDown time.Duration
}

// fallback is one --intelligence-fallback: the endpoint and where its key
// is (an environment variable or a file of the supervisor's; neither: no
// key).
type fallback struct {
	spec api.Intelligence
	key  api.KeySource
}

// envFallbackKey is the environment variable that carries the n-th (from
// 1) fallback's key to a child; the payload names it (KeyEnv), never the key.
func envFallbackKey(n int) string { return api.EnvIntelligenceKey + "_" + strconv.Itoa(n) }

func addFailover(f *cli.Flags, c *failoverConfig) {
	f.EnvFuncList("intelligence-fallback", "AGENT_INTELLIGENCE_FALLBACKS", "an endpoint tried after --intelligence when its breaker is open or a call to it fails: URL[,model=NAME][,dialect=openai|anthropic][,key-env=VAR|key-file=FILE][,timeout=D][,retries=N][,backoff=D] (the key is read from VAR or FILE, never given here); repeatable, tried in order (env: ';'-separated)", func(s string) error {
		spec, key, err := api.ParseEndpointSpec(s)
		if err != nil {
			return err
		}
		c.Fallbacks = append(c.Fallbacks, fallback{spec: spec, key: key})
		return nil
	})
	f.EnvInt(&c.BreakerFailures, "intelligence-breaker-failures", "AGENT_INTELLIGENCE_BREAKER_FAILURES", api.DefaultBreakerFailures, "an endpoint's breaker opens after this many failed model calls in a row (each after its retries)")
	f.EnvDuration(&c.BreakerCoolDown, "intelligence-breaker-cooldown", "AGENT_INTELLIGENCE_BREAKER_COOLDOWN", api.DefaultBreakerCoolDown, "an open breaker half-opens for one trial call after this (or the endpoint's Retry-After, when longer)")
}

// validate checks the fallbacks and the breaker policy, naming the bad
// setting; a fallback's key-env must be set (its key-file is read when the
// supervisor is built). c's own settings give a fallback's timings it does
// not set.
func (fc *failoverConfig) validate(c *coreConfig) error {
	if fc.BreakerFailures <= 0 || fc.BreakerFailures > api.MaxBreakerFailures {
		return fmt.Errorf("--intelligence-breaker-failures must be in [1, %d] (got %d)", api.MaxBreakerFailures, fc.BreakerFailures)
	}
	if fc.BreakerCoolDown <= 0 || fc.BreakerCoolDown > api.MaxDeadline {
		return fmt.Errorf("--intelligence-breaker-cooldown must be in (0, %s] (got %s)", api.MaxDeadline, fc.BreakerCoolDown)
	}
	if len(fc.Fallbacks) > api.MaxFallbacks {
		return fmt.Errorf("--intelligence-fallback: at most %d (got %d)", api.MaxFallbacks, len(fc.Fallbacks))
	}
	if len(fc.Fallbacks) > 0 && c.scripted() {
		return fmt.Errorf("--intelligence-fallback: %s has no fallbacks", scriptPrefix)
	}
	for i, fb := range c.intelligenceSpec().Fallbacks {
		if strings.HasPrefix(fb.Endpoint, "builtin:script") {
			return fmt.Errorf("--intelligence-fallback %s: %s cannot be a fallback", fb.Endpoint, scriptPrefix)
		}
		if err := intelligence.Check(fb); err != nil {
			return fmt.Errorf("--intelligence-fallback %s: %v", fb.Endpoint, err)
		}
		if env := fc.Fallbacks[i].key.Env; env != "" && os.Getenv(env) == "" {
			return fmt.Errorf("--intelligence-fallback %s: key-env %s is not set", fb.Endpoint, env)
		}
	}
	return nil
}

// apply adds the fallbacks and the breaker policy to the intelligence spec:
// a fallback without its own timings takes --intelligence-timeout,
// --intelligence-retries and --intelligence-backoff, and one with a key
// source names the variable its key reaches the child in.
func (fc *failoverConfig) apply(spec *api.Intelligence) {
	spec.Breaker = api.BreakerPolicy{Failures: fc.BreakerFailures, CoolDown: api.Duration(fc.BreakerCoolDown)}
	for i, fb := range fc.Fallbacks {
		s := fb.spec
		if s.RequestTimeout == 0 {
			s.RequestTimeout = spec.RequestTimeout
		}
		if s.Retries == nil {
			s.Retries = spec.Retries
		}
		if s.RetryBackoff == 0 {
			s.RetryBackoff = spec.RetryBackoff
		}
		if fb.key != (api.KeySource{}) {
			s.KeyEnv = envFallbackKey(i + 1)
		}
		spec.Fallbacks = append(spec.Fallbacks, s)
	}
}

// keyEnv reads each fallback's key from its source and returns the child
// environment entries that carry them (envFallbackKey). An unset variable or
// an unreadable or empty file is bad config.
func (fc *failoverConfig) keyEnv() ([]string, error) {
	var env []string
	for i, fb := range fc.Fallbacks {
		var key string
		switch {
		case fb.key.Env != "":
			key = os.Getenv(fb.key.Env)
			if key == "" {
				return nil, cli.UsageError("--intelligence-fallback %s: key-env %s is not set", fb.spec.Endpoint, fb.key.Env)
			}
		case fb.key.File != "":
			b, err := secretfile.Read(fb.key.File)
			if err != nil {
				return nil, cli.UsageError("--intelligence-fallback %s: key-file: %v", fb.spec.Endpoint, err)
			}
			if key = strings.TrimSpace(string(b)); key == "" {
				return nil, cli.UsageError("--intelligence-fallback %s: key-file %s is empty", fb.spec.Endpoint, fb.key.File)
			}
		default:
			continue
		}
		env = append(env, envFallbackKey(i+1)+"="+key)
	}
	return env, nil
}

// intelligenceMetrics is the supervisor's view of the endpoints, as the
// metrics read it.
func intelligenceMetrics(sup *supervisor.Supervisor) telemetry.IntelligenceMetrics {
	c := sup.IntelligenceCounts()
	out := telemetry.IntelligenceMetrics{Breakers: sup.IntelligenceBreakers()}
	for _, x := range c.Calls {
		out.Calls = append(out.Calls, telemetry.IntelligenceCall{Endpoint: x.Endpoint, Model: x.Model, Outcome: x.Outcome, N: x.N})
	}
	for _, x := range c.Failovers {
		out.Failovers = append(out.Failovers, telemetry.IntelligenceFailover{Endpoint: x.From.Endpoint, Model: x.From.Model, ToEndpoint: x.To.Endpoint, ToModel: x.To.Model, N: x.N})
	}
	return out
}
