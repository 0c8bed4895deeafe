package main

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
	"github.com/agentd/agentd/internal/admit"
)

// defaultServe is serve's configuration from no flags.
func defaultServe(t *testing.T) *serveConfig {
	t.Helper()
	c, err := parseServe(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	return c
}

func TestCoreValidate(t *testing.T) {
	parse := func() (*coreConfig, error) { return &defaultServe(t).Core, nil }
	clitest.CheckValidate(t, parse, (*coreConfig).Validate, []clitest.ValidateCase[coreConfig]{
		{"--max-steps", func(c *coreConfig) { c.MaxSteps = 0 }},
		{"--max-tokens", func(c *coreConfig) { c.MaxTokens = -1 }},
		{"--max-depth", func(c *coreConfig) { c.Caps.MaxDepth = 0 }},
		{"--max-depth", func(c *coreConfig) { c.Caps.MaxDepth = 17 }},
		{"--max-children", func(c *coreConfig) { c.Caps.MaxChildren = 257 }},
		{"--max-total-subagents", func(c *coreConfig) { c.Caps.MaxTotalSubagents = 0 }},
		{"--max-inflight", func(c *coreConfig) { c.Caps.MaxInflight = -3 }},
		{"--spawn-burst", func(c *coreConfig) { c.Caps.SpawnBurst = 0 }},
		{"--spawn-rate", func(c *coreConfig) { c.Caps.SpawnRate = 1e9 }},
		{"--tree-token-ceiling", func(c *coreConfig) { c.Caps.TreeTokenCeiling = -1 }},
		{"--deadline", func(c *coreConfig) { c.Deadline = -time.Second }},
		{"--deadline", func(c *coreConfig) { c.Deadline = 25 * time.Hour }},
		{"--drain-timeout", func(c *coreConfig) { c.DrainTimeout = 0 }},
		{"--spawn-ready", func(c *coreConfig) { c.SpawnReady = 0 }},
		{"--drain-grace", func(c *coreConfig) { c.DrainGrace = 0 }},
		{"--kill-grace", func(c *coreConfig) { c.KillGrace = 0 }},
		{"--reap-grace", func(c *coreConfig) { c.ReapGrace = 0 }},
		{"--child-deadline", func(c *coreConfig) { c.ChildDeadline = 0 }},
		{"--child-deadline", func(c *coreConfig) { c.ChildDeadline = 48 * time.Hour }},
		{"--child-deadline", func(c *coreConfig) { c.Deadline = 20 * time.Minute }},
		{"--exec-deadline", func(c *coreConfig) { c.ExecDeadline = 0 }},
		{"--progress-timeout", func(c *coreConfig) { c.ProgressTimeout = -time.Second }},
		{"--ping-interval", func(c *coreConfig) { c.PingInterval = 0 }},
		{"--ping-miss", func(c *coreConfig) { c.PingMiss = 0 }},
		{"--ping-miss", func(c *coreConfig) { c.PingMiss = maxPingMiss + 1 }},
		{"--rlimit-as", func(c *coreConfig) { c.RlimitAS = "lots" }},
		{"--rlimit-as", func(c *coreConfig) { c.RlimitAS = "64MiB" }},
		{"--rlimit-cpu", func(c *coreConfig) { c.RlimitCPU = -time.Second }},
		{"--input-hold", func(c *coreConfig) { c.InputHold = -time.Second }},
		{"--intelligence-timeout", func(c *coreConfig) { c.IntelTimeout = 0 }},
		{"--intelligence-backoff", func(c *coreConfig) { c.IntelBackoff = 0 }},
		{"--intelligence-backoff", func(c *coreConfig) { c.IntelBackoff = api.MaxRetryBackoff + time.Second }},
		{"--intelligence-retries", func(c *coreConfig) { c.IntelRetries = -1 }},
		{"--intelligence-retries", func(c *coreConfig) { c.IntelRetries = maxIntelRetries + 1 }},
		{"--max-repeats", func(c *coreConfig) { c.MaxRepeats = 1 }},
		{"--distillate-budget", func(c *coreConfig) { c.DistillateBudget = 199 }},
		{"--intelligence", func(c *coreConfig) { c.Intelligence = "builtin:nope" }},
		{"--intelligence", func(c *coreConfig) { c.Intelligence = "builtin:demo=forever" }},
		{"--intelligence", func(c *coreConfig) { c.Intelligence = "builtin:script" }},
		{"--intelligence", func(c *coreConfig) { c.Intelligence = "builtin:script=" }},
		{"--model", func(c *coreConfig) { c.Intelligence = "http://127.0.0.1:1/v1" }},
		{"--log-level", func(c *coreConfig) { c.LogLevel = "loud" }},
		{"--log-format", func(c *coreConfig) { c.LogFormat = "yaml" }},
		{"--log-format", func(c *coreConfig) { c.LogFormat = "JSON" }},
		{"OTEL_TRACES_EXPORTER", func(c *coreConfig) { c.Tracing = []string{"OTEL_TRACES_EXPORTER=zipkin"} }},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", func(c *coreConfig) { c.Tracing = []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"} }},
		{"--mcp-connect-timeout", func(c *coreConfig) { c.MCP.ConnectTimeout = 0 }},
		{"--mcp-call-wait", func(c *coreConfig) { c.MCP.CallWait = -time.Second }},
		{"--mcp-max-result", func(c *coreConfig) { c.MCP.MaxResult = minMCPResult - 1 }},
		{"--mcp-max-result", func(c *coreConfig) { c.MCP.MaxResult = maxMCPResult + 1 }},
		{"--allow-trifecta", func(c *coreConfig) {
			c.MCP.Servers = []string{"x=https://mcp.example/mcp"}
			c.MCP.Tags = []string{"x=untrusted_input,sensitive,egress"}
		}},
	})
}

func TestServeValidate(t *testing.T) {
	withFiles := func(c *serveConfig) {
		c.Identity.Cert, c.Identity.Key, c.Identity.Bundle = "cert.pem", "key.pem", "bundle.pem"
	}
	parse := func() (*serveConfig, error) { return parseServe(nil, io.Discard) }
	clitest.CheckValidate(t, parse, (*serveConfig).Validate, []clitest.ValidateCase[serveConfig]{
		{"--max-steps", func(c *serveConfig) { c.Core.MaxSteps = 0 }},
		{"--task-capacity", func(c *serveConfig) { c.TaskCapacity = 0 }},
		{"--task-retention", func(c *serveConfig) { c.TaskRetention = 0 }},
		{"--warm-pool", func(c *serveConfig) { c.WarmPool = -1 }},
		{"--warm-pool", func(c *serveConfig) { c.WarmPool = maxWarmPool + 1 }},
		{"--public-url", func(c *serveConfig) { c.PublicURL = "agentd.example:8443" }},
		{"--public-url", func(c *serveConfig) { c.PublicURL = "https://user:pw@agentd.example/" }},
		{"--peer", func(c *serveConfig) {
			p := mustPeer(t, "b=http://127.0.0.1:1/")
			c.Mesh.Peers = append(c.Mesh.Peers, p, p)
		}},
		{"token-file", func(c *serveConfig) { c.Mesh.Peers = append(c.Mesh.Peers, mustPeer(t, "b=http://u:pw@127.0.0.1:1/")) }},
		{"--tls-cert", func(c *serveConfig) {
			c.Mesh.Peers = append(c.Mesh.Peers, mustPeer(t, "b=https://127.0.0.1:1/,spiffe=spiffe://example.org/b"))
		}},
		{"--route", func(c *serveConfig) { c.Mesh.Routes = append(c.Mesh.Routes, mustRule(t, "x=peer:nobody")) }},
		{"--push-allow-net", func(c *serveConfig) { c.Mesh.PushAllowNet = "127.0.0.0/8,10.0.0.0/33" }},
		{"--send-wait", func(c *serveConfig) { c.Mesh.SendWait = -time.Second }},
		{"--store-wait", func(c *serveConfig) { c.Store.Wait = 0 }},
		{"--store-wait", func(c *serveConfig) { c.Store.Wait = time.Hour }},
		{"--metrics-addr", func(c *serveConfig) { c.Observe.MetricsAddr = "no-port" }},
		{"--heartbeat", func(c *serveConfig) { c.Observe.Heartbeat = 0 }},
		{"--heartbeat", func(c *serveConfig) { c.Observe.Heartbeat = 2 * time.Minute }},
		{"--listen", func(c *serveConfig) { c.Listen = "0.0.0.0:8080" }},
		{"--listen", func(c *serveConfig) { c.Listen = "agentd.example:8080" }},
		{"--listen", func(c *serveConfig) { c.Listen = "no-port" }},
		{"--listen", func(c *serveConfig) { withFiles(c); c.Listen = "no-port" }},
		{"--tls-key", func(c *serveConfig) { c.Identity.Cert = "cert.pem" }},
		{"--spiffe-socket", func(c *serveConfig) { withFiles(c); c.Identity.SPIFFESocket = "/tmp/x.sock" }},
		{"--spiffe-socket", func(c *serveConfig) { c.Identity.SPIFFESocket = "http://nope" }},
		{"--jwt-bundle", func(c *serveConfig) { c.Identity.JWTBundle = "jwks.json" }},
		{"--health-listen", func(c *serveConfig) { c.Identity.HealthListen = "no-port" }},
		{"--allow-peer", func(c *serveConfig) { c.Identity.AllowPeer = []string{"spiffe://example.org/peer"} }},
		{"--operator", func(c *serveConfig) { withFiles(c); c.Identity.Operator = []string{"not-an-id"} }},
		{"--allow-trust-domain", func(c *serveConfig) { withFiles(c); c.Identity.AllowTrustDomain = []string{"Bad Domain"} }},
		{"--max-message", func(c *serveConfig) { c.Budgets.MaxMessage = "1KiB" }},
		{"--max-message", func(c *serveConfig) { c.Budgets.MaxMessage = "1GiB" }},
		{"--max-message", func(c *serveConfig) { c.Budgets.MaxMessage = "lots" }},
		{"--task-store-bytes", func(c *serveConfig) { c.Budgets.TaskStoreBytes = "x" }},
		{"--task-quota", func(c *serveConfig) { c.Budgets.TaskQuota = -1 }},
		{"--task-quota", func(c *serveConfig) { c.Budgets.TaskQuota = c.TaskCapacity + 1 }},
		{"--task-quota-bytes", func(c *serveConfig) { c.Budgets.TaskQuotaBytes = "1KiB" }},
		{"--task-quota-bytes", func(c *serveConfig) { c.Budgets.TaskStoreBytes, c.Budgets.TaskQuotaBytes = "32MiB", "64MiB" }},
		{"--blob-quota-bytes", func(c *serveConfig) { c.Budgets.BlobStoreBytes, c.Budgets.BlobQuotaBytes = "8MiB", "16MiB" }},
		{"--max-conns", func(c *serveConfig) { c.Budgets.MaxConns = 0 }},
		{"--max-conns-per-addr", func(c *serveConfig) { c.Budgets.MaxConnsPerAddr = 0 }},
		{"--max-conns-per-addr", func(c *serveConfig) { c.Budgets.MaxConnsPerAddr = c.Budgets.MaxConns + 1 }},
		{"--body-timeout", func(c *serveConfig) { c.Budgets.BodyTimeout = 0 }},
		{"--idle-timeout", func(c *serveConfig) { c.Budgets.IdleTimeout = -time.Second }},
		{"--header-timeout", func(c *serveConfig) { c.Budgets.HeaderTimeout = 0 }},
	})
}

// The byte budgets' defaults for a 1 GiB pod (admission's reserve of it:
// 256 MiB).
func TestBudgetDefaults(t *testing.T) {
	c, err := parseServe(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Budgets.resolve(admit.Derive(1<<30, c.WarmPool).Reserve, c.TaskCapacity, c.TaskRetention)
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	if b.maxMessage != 4*mib || b.tasks.Bytes != 64*mib || b.tasks.QuotaTasks != 1250 || b.tasks.QuotaBytes != 9*mib ||
		b.blobs.MaxTotalBytes != 32*mib || b.blobs.QuotaBytes != 5*mib || b.blobs.MaxBlobBytes != 5*mib {
		t.Fatalf("budgets for 1GiB: %+v", b)
	}
	if b.conns.MaxConns != 1024 || b.conns.MaxConnsPerAddr != 128 || b.conns.BodyTimeout != time.Minute {
		t.Fatalf("connection limits: %+v", b.conns)
	}
	// A setting that collides with a derived default is bad config.
	c.Budgets.TaskQuotaBytes = "128MiB"
	if _, err := c.Budgets.resolve(admit.Derive(1<<30, c.WarmPool).Reserve, c.TaskCapacity, c.TaskRetention); err == nil || !strings.Contains(err.Error(), "--task-quota-bytes") {
		t.Fatalf("a quota over the derived store: %v", err)
	}
}

func TestRunValidate(t *testing.T) {
	parse := func() (*runConfig, error) { return parseRun([]string{"--instruction", "x"}, io.Discard) }
	clitest.CheckValidate(t, parse, (*runConfig).Validate, []clitest.ValidateCase[runConfig]{
		{"--instruction", func(c *runConfig) { c.Instruction = "" }},
		{"--mode", func(c *runConfig) { c.Modes.Mode = "forever" }},
		{"--mode schedule needs --schedule", func(c *runConfig) { c.Modes.Mode = "schedule" }},
		{`--schedule "61 * * * *"`, func(c *runConfig) { c.Modes.Mode, c.Modes.Schedule = "schedule", "61 * * * *" }},
		{"--schedule is a setting of --mode schedule, and the mode is once", func(c *runConfig) { c.Modes.Schedule = "@hourly" }},
		{"--interval is a setting of --mode loop, and the mode is schedule", func(c *runConfig) {
			c.Modes.Mode, c.Modes.Schedule, c.Modes.Interval = "schedule", "@hourly", time.Second
		}},
		{"--overlap is a setting of --mode schedule or --mode reactive", func(c *runConfig) { c.Modes.Overlap = "skip" }},
		{"--overlap: unknown overlap policy", func(c *runConfig) {
			c.Modes.Mode, c.Modes.Schedule, c.Modes.Overlap = "schedule", "@hourly", "sometimes"
		}},
		{"--stop-on: unknown status", func(c *runConfig) { c.Modes.Mode, c.Modes.StopOn = "loop", []string{"done"} }},
		{"--max-runs must not be negative", func(c *runConfig) { c.Modes.Mode, c.Modes.MaxRuns = "loop", -1 }},
		{"--mode reactive needs --subscribe", func(c *runConfig) { c.Modes.Mode = "reactive" }},
		{`--subscribe nope=demo://x: no MCP server "nope" is configured`, func(c *runConfig) {
			c.Modes.Mode, c.Modes.Subscribe = "reactive", []string{"nope=demo://x"}
		}},
		{"--subscribe: ", func(c *runConfig) { c.Modes.Mode, c.Modes.Subscribe = "reactive", []string{"no-uri"} }},
		{"--mode workflow needs --workflow", func(c *runConfig) { c.Modes.Mode = "workflow" }},
		{"--workflow is a setting of --mode workflow", func(c *runConfig) { c.Modes.Workflow = "wf.json" }},
		{"--debounce is a setting of --mode reactive", func(c *runConfig) { c.Modes.Debounce = time.Second }},
		{"--deadline", func(c *runConfig) { c.Core.Deadline = 0 }},
	})
}

// The arguments of `agentd run` are the instruction, unless --instruction is
// given.
func TestRunArguments(t *testing.T) {
	c, err := parseRun([]string{"count", "the", "words"}, io.Discard)
	if err != nil || c.Instruction != "count the words" {
		t.Fatalf("run TEXT: %+v, %v", c, err)
	}
	_, err = parseRun([]string{"--instruction", "x", "y"}, io.Discard)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != api.ExitUsage || !strings.Contains(err.Error(), "--instruction") {
		t.Fatalf("arguments after --instruction: %v", err)
	}
}

func TestCertsValidate(t *testing.T) {
	parse := func() (*certsConfig, error) {
		return parseCerts([]string{"init", "--trust-domain", "example.org", "--dir", "d"}, io.Discard)
	}
	clitest.CheckValidate(t, parse, (*certsConfig).Validate, []clitest.ValidateCase[certsConfig]{
		{"--dir", func(c *certsConfig) { c.Dir = "" }},
		{"--trust-domain", func(c *certsConfig) { c.TrustDomain = "" }},
		{"--trust-domain", func(c *certsConfig) { c.TrustDomain = "Bad Domain" }},
		{"--validity", func(c *certsConfig) { c.Validity = 0 }},
	})
}

// Validate reads no file: settings that name missing files pass it, and the
// build's step that reads each fails, as bad config naming the setting.
func TestFilesAreReadByTheBuild(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	c := defaultServe(t)
	c.Core.KeyFile = missing
	c.Core.MCP.Servers = []string{"x=https://mcp.example/mcp"}
	c.Core.MCP.TokenFiles = []string{"x=" + missing}
	c.Identity.Cert, c.Identity.Key, c.Identity.Bundle = missing, missing, missing
	c.Identity.TokensFile = missing
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate read a file: %v", err)
	}
	script := defaultServe(t)
	script.Core.Intelligence = "builtin:script=" + missing
	if err := script.Validate(); err != nil {
		t.Fatalf("Validate read the script: %v", err)
	}

	wantBadConfig := func(step, setting string, err error) {
		t.Helper()
		var ee *cli.ExitError
		if !errors.As(err, &ee) || ee.Code != api.ExitUsage || !strings.Contains(err.Error(), setting) {
			t.Errorf("%s: %v; want exit 2 naming %s", step, err, setting)
		}
	}
	_, err := loadIntelligence(&c.Core)
	wantBadConfig("the key file", "--intelligence-key-file", err)
	_, err = loadIntelligence(&script.Core)
	wantBadConfig("the script", "--intelligence", err)
	cfg, err := c.Core.MCP.parse()
	if err != nil {
		t.Fatal(err)
	}
	wantBadConfig("the MCP token file", "--mcp-token-file", cli.BadConfig(c.Core.MCP.tokens(&cfg)))
	_, err = openIdentity(&c.Identity, discardLog())
	wantBadConfig("the bearer tokens", "--bearer-tokens-file", err)
	c.Identity.TokensFile = ""
	_, err = openIdentity(&c.Identity, discardLog())
	wantBadConfig("the TLS files", "--tls-cert", err)

}
