package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
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

// validateCase is one bad setting: set breaks a valid configuration, and the
// error must name want.
type validateCase[C any] struct {
	want string
	set  func(c *C)
}

// checkValidate checks that a configuration from parse validates, and that
// each case, applied to another, fails naming its setting.
func checkValidate[C any](t *testing.T, parse func() (*C, error), validate func(*C) error, cases []validateCase[C]) {
	t.Helper()
	fresh := func() *C {
		t.Helper()
		c, err := parse()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := validate(fresh()); err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	for _, tc := range cases {
		c := fresh()
		tc.set(c)
		err := validate(c)
		if err == nil {
			t.Errorf("%s: Validate passed", tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q does not name %s", err, tc.want)
		}
		var ee *exitError
		if errors.As(err, &ee) {
			t.Errorf("%s: Validate returned an exit code (%d): the command maps its errors to exit 2", tc.want, ee.code)
		}
	}
}

func TestCoreValidate(t *testing.T) {
	parse := func() (*coreConfig, error) { return &defaultServe(t).Core, nil }
	checkValidate(t, parse, (*coreConfig).Validate, []validateCase[coreConfig]{
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
	checkValidate(t, parse, (*serveConfig).Validate, []validateCase[serveConfig]{
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
	checkValidate(t, parse, (*runConfig).Validate, []validateCase[runConfig]{
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
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != api.ExitUsage || !strings.Contains(err.Error(), "--instruction") {
		t.Fatalf("arguments after --instruction: %v", err)
	}
}

func TestClientValidate(t *testing.T) {
	parseSendArgs := func() (*sendConfig, error) {
		return parseSend([]string{"--to", "https://agentd.example/", "--tls-bundle", "bundle.pem", "--server-id", "spiffe://example.org/agentd", "hi"}, io.Discard)
	}
	checkValidate(t, parseSendArgs, (*sendConfig).Validate, []validateCase[sendConfig]{
		{"--to", func(c *sendConfig) { c.Client.To = "" }},
		{"--timeout", func(c *sendConfig) { c.Client.Timeout = -time.Second }},
		{"TEXT", func(c *sendConfig) { c.Text = "  " }},
		{"--server-id", func(c *sendConfig) { c.Client.ServerID = "" }},
		{"--server-id", func(c *sendConfig) { c.Client.ServerID = "not-an-id" }},
		{"--tls-bundle", func(c *sendConfig) { c.Client.Bundle = "" }},
		{"--tls-cert", func(c *sendConfig) { c.Client.Cert = "cert.pem" }},
		{"--tls-key", func(c *sendConfig) { c.Client.Key = "key.pem" }},
		{"--spiffe-socket", func(c *sendConfig) { c.Client.Bundle, c.Client.SPIFFESocket = "", "http://nope" }},
		// A credential goes only to a pinned server: a client SVID or a
		// token over https needs --server-id (or the explicit opt-out), a
		// token over plain http a loopback address.
		{"--insecure-any-server-id", func(c *sendConfig) { c.Client.Cert, c.Client.Key, c.Client.ServerID = "cert.pem", "key.pem", "" }},
		{"--insecure-any-server-id", func(c *sendConfig) {
			c.Client.Bundle, c.Client.SPIFFESocket, c.Client.ServerID = "", "unix:///tmp/agent.sock", ""
		}},
		{"--token-file", func(c *sendConfig) { c.Client.To, c.Client.TokenFile = "http://agentd.example/", "token" }},
	})
	// The opt-out and loopback pass.
	for _, mod := range []func(c *sendConfig){
		func(c *sendConfig) {
			c.Client.Cert, c.Client.Key, c.Client.ServerID, c.Client.AnyServerID = "cert.pem", "key.pem", "", true
		},
		func(c *sendConfig) { c.Client.To, c.Client.TokenFile = "http://127.0.0.1:8080/", "token" },
	} {
		c, err := parseSendArgs()
		if err != nil {
			t.Fatal(err)
		}
		mod(c)
		if err := c.Validate(); err != nil {
			t.Errorf("refused: %v", err)
		}
	}
	parseCtlArgs := func() (*ctlConfig, error) {
		return parseCtl([]string{"caps", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard)
	}
	checkValidate(t, parseCtlArgs, (*ctlConfig).Validate, []validateCase[ctlConfig]{
		{"--to", func(c *ctlConfig) { c.Client.To = "" }},
		{"--timeout", func(c *ctlConfig) { c.Client.Timeout = 0 }},
		{"--tls-bundle", func(c *ctlConfig) { c.Client.To = "https://127.0.0.1:1" }},
	})
	// --watch runs until interrupted unless --timeout is given; it prints
	// the stream, not JSON.
	parseWatch := func() (*ctlConfig, error) {
		return parseCtl([]string{"tree", "--watch", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard)
	}
	checkValidate(t, parseWatch, (*ctlConfig).Validate, []validateCase[ctlConfig]{
		{"--json", func(c *ctlConfig) { c.JSON = true }},
	})
	if c, _ := parseWatch(); !c.Client.Unbounded || c.Client.Timeout != 0 {
		t.Errorf("--watch without --timeout: %+v", c.Client)
	}
	if c, err := parseCtl([]string{"tree", "--watch", "--timeout", "2s", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard); err != nil || c.Client.Unbounded || c.Client.Timeout != 2*time.Second {
		t.Errorf("--watch --timeout 2s: %+v %v", c, err)
	}
	if _, err := parseCtl([]string{"caps", "--watch", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard); err == nil {
		t.Error("--watch is for a2a.Tree only")
	}
}

func TestCertsValidate(t *testing.T) {
	parse := func() (*certsConfig, error) {
		return parseCerts([]string{"init", "--trust-domain", "example.org", "--dir", "d"}, io.Discard)
	}
	checkValidate(t, parse, (*certsConfig).Validate, []validateCase[certsConfig]{
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
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != api.ExitUsage || !strings.Contains(err.Error(), setting) {
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
	wantBadConfig("the MCP token file", "--mcp-token-file", badConfig(c.Core.MCP.tokens(&cfg)))
	_, err = openIdentity(&c.Identity, discardLog())
	wantBadConfig("the bearer tokens", "--bearer-tokens-file", err)
	c.Identity.TokensFile = ""
	_, err = openIdentity(&c.Identity, discardLog())
	wantBadConfig("the TLS files", "--tls-cert", err)

	send, err := parseSend([]string{"--to", "http://127.0.0.1:1", "--token-file", missing, "hi"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Validate(); err != nil {
		t.Fatalf("Validate read the token file: %v", err)
	}
	_, closeFn, err := send.Client.httpClient(context.Background(), discardLog())
	closeFn()
	wantBadConfig("the client token", "--token-file", err)
}

// A token file holds one non-empty line.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for content, ok := range map[string]bool{"tok\n": true, "  tok  ": true, "\n": false, "": false, "a\nb\n": false} {
		file := filepath.Join(dir, "tok")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		tok, err := readToken(file)
		if (err == nil) != ok || (ok && tok != "tok") {
			t.Errorf("readToken(%q) = %q, %v", content, tok, err)
		}
	}
}
