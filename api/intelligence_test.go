package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseEndpointSpec(t *testing.T) {
	spec, key, err := ParseEndpointSpec("http://10.0.0.2:8000/v1,model=llama3,dialect=openai,key-env=BACKUP_KEY,timeout=5s,retries=1,backoff=100ms")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Endpoint != "http://10.0.0.2:8000/v1" || spec.Model != "llama3" || spec.Dialect != DialectOpenAI || key != (KeySource{Env: "BACKUP_KEY"}) ||
		spec.RequestTimeout.D() != 5*time.Second || spec.Retries == nil || *spec.Retries != 1 || spec.RetryBackoff.D() != 100*time.Millisecond {
		t.Fatalf("%+v %+v", spec, key)
	}
	if _, k, err := ParseEndpointSpec("http://h/v1,key-file=/run/k"); err != nil || k.File != "/run/k" {
		t.Fatalf("key-file: %+v %v", k, err)
	}
	for _, bad := range []string{
		"", ",model=m", "http://h/v1,model", "http://h/v1,colour=blue", "http://h/v1,dialect=gemini",
		"http://h/v1,key-env=1BAD", "http://h/v1,key-env=A,key-file=/k", "http://h/v1,timeout=0s",
		"http://h/v1,retries=3x", "http://h/v1,retries=21", "http://user:hunter2@h/v1,model=m",
	} {
		_, _, err := ParseEndpointSpec(bad)
		if !errors.Is(err, ErrBadEndpointSpec) {
			t.Errorf("%q: %v, want ErrBadEndpointSpec", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}

func TestValidateFailover(t *testing.T) {
	ok := Intelligence{Endpoint: "http://a/v1", Model: "m", Fallbacks: []Intelligence{{Endpoint: "http://b/v1", Model: "n", KeyEnv: "AGENT_INTELLIGENCE_KEY_1"}},
		Breakers: []EndpointBreaker{{Endpoint: "http://b/v1", Model: "n", State: BreakerOpen}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Intelligence){
		"nested fallbacks":  func(i *Intelligence) { i.Fallbacks[0].Fallbacks = []Intelligence{{Endpoint: "http://c/v1"}} },
		"duplicate":         func(i *Intelligence) { i.Fallbacks[0].Endpoint, i.Fallbacks[0].Model = "http://a/v1", "m" },
		"no endpoint":       func(i *Intelligence) { i.Fallbacks[0].Endpoint = "" },
		"bad key env":       func(i *Intelligence) { i.Fallbacks[0].KeyEnv = "A=B" },
		"negative failures": func(i *Intelligence) { i.Breaker.Failures = -1 },
		"unknown state":     func(i *Intelligence) { i.Breakers[0].State = "ajar" },
		"foreign breaker":   func(i *Intelligence) { i.Breakers[0].Endpoint = "http://evil/v1" },
		"too many": func(i *Intelligence) {
			for n := range MaxFallbacks {
				i.Fallbacks = append(i.Fallbacks, Intelligence{Endpoint: "http://x/v1", Model: string(rune('a' + n))})
			}
		},
	} {
		i := ok
		i.Fallbacks = append([]Intelligence(nil), ok.Fallbacks...)
		i.Breakers = append([]EndpointBreaker(nil), ok.Breakers...)
		mutate(&i)
		if err := i.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	eps := ok.Endpoints()
	if len(eps) != 2 || eps[0].Fallbacks != nil || eps[0].Breakers != nil || eps[1].Endpoint != "http://b/v1" {
		t.Fatalf("Endpoints = %+v", eps)
	}
}

func FuzzParseEndpointSpec(f *testing.F) {
	f.Add("http://10.0.0.2:8000/v1,model=llama3,key-env=K,retries=2")
	f.Add("http://u:p@h/v1,timeout=1s")
	f.Fuzz(func(t *testing.T, s string) {
		spec, key, err := ParseEndpointSpec(s)
		if err != nil {
			if !errors.Is(err, ErrBadEndpointSpec) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if spec.Endpoint == "" || key.Validate() != nil || (spec.Retries != nil && *spec.Retries < 0) || spec.RequestTimeout < 0 {
			t.Fatalf("%q: %+v %+v", s, spec, key)
		}
	})
}
