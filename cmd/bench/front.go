package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/google/uuid"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

// The front's helper processes: each serves one A2A server over mTLS on
// loopback, prints its address on stdout, and stops when its stdin closes.
const (
	roleFrontAgentd = "front-agentd"
	roleFrontStock  = "front-stock"
)

// envCertDir tells a role process where the certificates are.
const envCertDir = "AGENTD_BENCH_CERTS"

// benchTD is the trust domain of the certificates minted for the bench.
var benchTD = spiffeid.RequireTrustDomainFromString("bench.agentd.test")

var frontFigure = figure{name: "front", run: runFront, rows: frontRows}

// loadResult is one load run against one server.
type loadResult struct {
	RPS float64 `json:"rps"`
	Lat Summary `json:"lat"`
}

// frontRound is one round of figure 2: each server at concurrency 1 and 16,
// and agentd's A2A 1.0 SendMessage over the HTTP+JSON binding (REST).
type frontRound struct {
	Agentd1  loadResult `json:"agentd_1"`
	Stock1   loadResult `json:"stock_1"`
	Agentd16 loadResult `json:"agentd_16"`
	Stock16  loadResult `json:"stock_16"`
	// GRPC1 and GRPC16 are agentd's front over the A2A 1.0 gRPC binding
	// (SendMessage), on the same listener, one HTTP/2 connection.
	GRPC1  loadResult `json:"grpc_1"`
	GRPC16 loadResult `json:"grpc_16"`
	REST1  loadResult `json:"rest_1"`
	REST16 loadResult `json:"rest_16"`
}

// instantProvider is the local provider of figure 2 (and of the task store's
// memory figure): every delegation has completed by the time Start returns.
// It stands in for the supervisor so that the figure measures the front alone.
type instantProvider struct{}

var (
	doneCh        = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
	instantResult = api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("ok"), Usage: api.Usage{TokensIn: 1, TokensOut: 1, Steps: 1}}
)

func (instantProvider) Name() string { return delegate.LocalName }
func (instantProvider) Capabilities() delegate.Capabilities {
	return delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
}
func (instantProvider) InheritsParentContext() bool { return false }
func (instantProvider) Start(_ context.Context, req delegate.Request) (delegate.Run, error) {
	return instantRun(req.Handle), nil
}

type instantRun string

func (r instantRun) ID() string               { return string(r) }
func (instantRun) Done() <-chan struct{}      { return doneCh }
func (instantRun) Result() api.SubagentResult { return instantResult }
func (instantRun) Cancel(string)              {}

// newInstantEngine is agentd's engine, executor and router over a bounded
// store, with instantProvider as the local provider, behind adm (nil: no
// admission control).
func newInstantEngine(capacity int, url string, adm *admit.Controller) *tasks.Engine {
	return newInstantEngineOn(tasks.NewMemoryStore(capacity, time.Hour), url, adm)
}

// newInstantEngineOn is newInstantEngine over store (figure 6).
func newInstantEngineOn(store tasks.Store, url string, adm *admit.Controller) *tasks.Engine {
	log := slog.New(slog.DiscardHandler)
	router := &delegate.Router{}
	_ = router.Register(instantProvider{})
	exec := a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router:       router,
		CancelHandle: func(string, string) bool { return false },
		Limits:       api.Limits{MaxSteps: 50, MaxTokens: 200000, Deadline: api.Duration(10 * time.Minute), MaxChildren: 8},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
		PublicURL:    url,
		Instance:     uuid.NewString(),
		MaxDepth:     func() int { return 4 },
		Lineages:     &delegate.Lineages{},
		Log:          log,
	})
	journal, _ := store.(tasks.PushJournal)
	pusher := tasks.NewPusher(tasks.PushSettings{Log: log, Journal: journal}, store.ListPush)
	opts := []tasks.EngineOption{tasks.WithPusher(pusher)}
	if adm != nil {
		opts = append(opts, tasks.WithAdmission(adm, admit.Policy{}))
	}
	return tasks.NewEngine(store, exec, log, opts...)
}

// podAdmission is the admission control `agentd serve` derives for a 1 GiB
// pod with the default warm pool (admit.Derive).
func podAdmission() *admit.Controller {
	d := admit.Derive(1<<30, 2)
	c, err := admit.New(admit.Config{Bounds: d.Bounds, Ceiling: d.Ceiling})
	if err != nil {
		panic(err)
	}
	return c
}

// frontHandler is agentd's front over engine, as `agentd serve` builds it:
// SPIFFE authentication and authorization of the bench's trust domain, the
// router, JSON-RPC validation and dispatch.
func frontHandler(engine *tasks.Engine, src tlsconfig.Source, url string, log *slog.Logger) (http.Handler, error) {
	cfg, err := frontConfig(engine, src, url, log)
	if err != nil {
		return nil, err
	}
	return server.Handler(cfg), nil
}

// frontConfig is the configuration of frontHandler's front.
func frontConfig(engine *tasks.Engine, src tlsconfig.Source, url string, log *slog.Logger) (server.Config, error) {
	policy, err := tlsconfig.ParsePolicy(nil, []string{benchTD.String()}, nil)
	if err != nil {
		return server.Config{}, err
	}
	return server.Config{
		Handler: engine,
		Card:    a2abind.Card(a2abind.CardConfig{Name: "agentd", Description: "bench", URL: url, Version: "bench", MaxDepth: 4, Push: true, MutualTLS: true}),
		Auth:    &server.Auth{Source: src, Policy: policy, Log: log},
		Log:     log,
	}, nil
}

// serveFrontAgentd is agentd's front as `agentd serve` builds it: mTLS with
// SPIFFE authentication and authorization, the chi router and JSON-RPC
// validation, admission control with a 1 GiB pod's bounds, the engine and
// bounded store, the executor and the delegation router; only the local
// provider is replaced by instantProvider.
func serveFrontAgentd(ctx context.Context, cfg Config) error {
	src, ln, err := roleListen(os.Getenv(envCertDir))
	if err != nil {
		return err
	}
	url := "https://" + ln.Addr().String() + "/"
	engine := newInstantEngine(10000, url, podAdmission())
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fc, err := frontConfig(engine, src, url, log)
	if err != nil {
		return err
	}
	// As serve builds it: the connection budgets (caps, body deadline, idle
	// timeout) on the listener and the server, and the listener split
	// between the HTTP server and the gRPC binding's own server.
	var limits server.ConnLimits
	srv := limits.Server(server.Handler(fc), nil)
	srv.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	split, err := server.NewSplit(limits.Listener(ln, nil), tlsconfig.ServerConfig(src), srv, server.GRPCServer(fc, limits), limits, nil)
	if err != nil {
		return err
	}
	return roleServeSplit(split, filepath.Join(cfg.ProfileDir, "front-agentd.pprof"), cfg.ProfileDir != "")
}

// stockExecutor is the stock server's trivial executor: it produces the same
// task agentd's front does (submitted, working, one artifact, completed).
type stockExecutor struct{}

func (stockExecutor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if reqCtx.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(reqCtx, reqCtx.Message)); err != nil {
			return err
		}
	}
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	art := a2a.NewArtifactEvent(reqCtx, a2a.TextPart{Text: "ok"})
	art.LastChunk = true
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	final := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	final.Final = true
	return q.Write(ctx, final)
}

func (stockExecutor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// serveFrontStock is a stock a2a-go v0.3.3 server behind the same TLS.
func serveFrontStock(ctx context.Context, cfg Config) error {
	src, ln, err := roleListen(os.Getenv(envCertDir))
	if err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	h := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(stockExecutor{}))
	return roleServe(&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, src, ln, filepath.Join(cfg.ProfileDir, "front-stock.pprof"), cfg.ProfileDir != "")
}

// roleListen loads the server SVID minted in dir and listens on a loopback
// port.
func roleListen(dir string) (tlsconfig.Source, net.Listener, error) {
	src, err := tlsconfig.NewFileSource(tlsconfig.Files{
		Cert: filepath.Join(dir, tlsconfig.DevServerCert), Key: filepath.Join(dir, tlsconfig.DevServerKey), Bundle: filepath.Join(dir, tlsconfig.DevBundle),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	return src, ln, nil
}

// roleServe serves srv on ln until stdin closes, over mTLS, with a CPU
// profile if asked.
func roleServe(srv *http.Server, src tlsconfig.Source, ln net.Listener, profile string, profiling bool) error {
	if profiling {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	srv.TLSConfig = tlsconfig.ServerConfig(src)
	srv.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	fmt.Println(ln.Addr().String())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); srv.Close() }()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// roleServeSplit is roleServe for a listener split (server.Split).
func roleServeSplit(split *server.Split, profile string, profiling bool) error {
	if profiling {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	served := make(chan error, 1)
	go func() { served <- split.Serve() }()
	fmt.Println(split.Addr().String())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); split.Close() }()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// roleProc is a running role process.
type roleProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

func startRole(ctx context.Context, role string, cfg Config, certDir string, logw io.Writer) (*roleProc, error) {
	return startRoleEnv(ctx, role, cfg, certDir, nil, logw)
}

// startRoleEnv is startRole with env added to the role's environment.
func startRoleEnv(ctx context.Context, role string, cfg Config, certDir string, env []string, logw io.Writer) (*roleProc, error) {
	cmd, err := figureCmd(ctx, role, cfg)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(append(cmd.Env, envCertDir+"="+certDir), env...)
	cmd.Stderr = logw
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s: no address: %w", role, err)
	}
	return &roleProc{cmd: cmd, stdin: stdin, url: "https://" + string(bytes.TrimSpace([]byte(line))) + "/"}, nil
}

func (r *roleProc) stop() error {
	r.stdin.Close()
	return r.cmd.Wait()
}

// mintCerts writes a development CA, a server SVID and a client SVID.
func mintCerts(dir string) error {
	_, err := tlsconfig.WriteDevSet(dir, benchTD, 24*time.Hour, true)
	return err
}

// benchClient returns a keep-alive HTTP/1.1 client presenting the peer SVID
// of dir, with room for conns connections.
func benchClient(dir string, conns int) (*http.Client, error) {
	return svidClient(dir, tlsconfig.DevPeerCert, tlsconfig.DevPeerKey, conns)
}

// operatorClient is benchClient presenting the operator SVID of dir (serve
// allows it with --operator, operatorArgs), for the a2a.* methods.
func operatorClient(dir string) (*http.Client, error) {
	return svidClient(dir, tlsconfig.DevOperatorCert, tlsconfig.DevOperatorKey, 1)
}

func svidClient(dir, cert, key string, conns int) (*http.Client, error) {
	src, err := tlsconfig.NewFileSource(tlsconfig.Files{
		Cert: filepath.Join(dir, cert), Key: filepath.Join(dir, key), Bundle: filepath.Join(dir, tlsconfig.DevBundle),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	tc := tlsconfig.ClientConfig(src, src, spiffetls.AuthorizeMemberOf(benchTD))
	tc.NextProtos = []string{"http/1.1"}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     tc,
		MaxIdleConns:        2 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}, nil
}

// sendBody is one message/send request.
func sendBody(id int64, worker int, text string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"bench-%d-%d","role":"user","parts":[{"kind":"text","text":%q}]}}}`,
		id, worker, id, text)
}

// post sends one JSON-RPC request and returns the answer's body and status.
func post(ctx context.Context, c *http.Client, url string, body []byte) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return b, resp.StatusCode, err
}

// sendOnce posts one message/send and checks that the task completed.
func sendOnce(ctx context.Context, c *http.Client, url string, body []byte) error {
	b, status, err := post(ctx, c, url, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"state":"completed"`)) {
		return fmt.Errorf("message/send: HTTP %d: %.300s", status, b)
	}
	return nil
}

// restSendBody is one A2A 1.0 SendMessage request of the HTTP+JSON binding
// (POST /message:send).
func restSendBody(worker, id int64, text string) []byte {
	return fmt.Appendf(nil, `{"message":{"messageId":"bench-rest-%d-%d","role":"ROLE_USER","parts":[{"text":%q}]}}`, worker, id, text)
}

// restSendOnce posts one SendMessage to base's /message:send and checks
// that the task completed.
func restSendOnce(ctx context.Context, c *http.Client, base string, body []byte) error {
	b, status, err := post(ctx, c, strings.TrimSuffix(base, "/")+"/message:send", body)
	if err != nil {
		return err
	}
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"state":"TASK_STATE_COMPLETED"`)) {
		return fmt.Errorf("POST /message:send: HTTP %d: %.300s", status, b)
	}
	return nil
}

// loads numbers the load calls: each sends messages of its own, so that no
// send repeats a messageId an earlier call sent (a duplicate returns the
// task it made and starts nothing: the store's cheapest path, not a send).
var loads atomic.Int64

// load runs conc workers, each sending message/send back to back on its own
// keep-alive connection, for d.
func load(ctx context.Context, c *http.Client, url string, conc int, d time.Duration) (loadResult, error) {
	return loadWith(conc, d, func(run, w int, i int64) error { return sendOnce(ctx, c, url, sendBody(i, run|w, "hello")) })
}

// grpcLoad is load over the gRPC binding: SendMessage, each a new message,
// the conc workers sharing one HTTP/2 connection. Like load's JSON-RPC
// client, which checks the answer's bytes, it calls the generated stub and
// checks the task's state, leaving a2agrpc.Client's conversion to a2a-go's
// types (a client's cost, not the front's) out of the figure.
func grpcLoad(ctx context.Context, c a2apb.A2AServiceClient, conc int, d time.Duration) (loadResult, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "a2a-version", "1.0")
	return loadWith(conc, d, func(run, w int, i int64) error {
		res, err := c.SendMessage(ctx, &a2apb.SendMessageRequest{Message: &a2apb.Message{
			MessageId: fmt.Sprintf("bench-%d-%d", run|w, i), Role: a2apb.Role_ROLE_USER,
			Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}}})
		if err != nil {
			return err
		}
		if st := res.GetTask().GetStatus().GetState(); st != a2apb.TaskState_TASK_STATE_COMPLETED {
			return fmt.Errorf("SendMessage over gRPC: state %s, want completed", st)
		}
		return nil
	})
}

// grpcBenchConn is a gRPC connection to the server at url presenting the
// peer SVID of dir, with the fixed flow-control windows of a2agrpc's client
// (the one agentd calls its peers with: no bandwidth-delay PING a call).
func grpcBenchConn(dir, url string) (*grpc.ClientConn, error) {
	src, err := tlsconfig.NewFileSource(tlsconfig.Files{
		Cert: filepath.Join(dir, tlsconfig.DevPeerCert), Key: filepath.Join(dir, tlsconfig.DevPeerKey), Bundle: filepath.Join(dir, tlsconfig.DevBundle),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	creds := credentials.NewTLS(tlsconfig.ClientConfig(src, src, spiffetls.AuthorizeMemberOf(benchTD)))
	return grpc.NewClient("passthrough:///"+a2agrpc.Target(url), append(a2agrpc.WindowOptions(), grpc.WithTransportCredentials(creds))...)
}

// restLoad is load over the HTTP+JSON binding's SendMessage.
func restLoad(ctx context.Context, c *http.Client, url string, conc int, d time.Duration) (loadResult, error) {
	return loadWith(conc, d, func(run, w int, i int64) error {
		return restSendOnce(ctx, c, url, restSendBody(int64(run|w), i, "hello"))
	})
}

// loadWith runs conc workers, each calling send back to back (with the
// load's run number, its worker number and its call number), for d.
func loadWith(conc int, d time.Duration, send func(run, w int, i int64) error) (loadResult, error) {
	run := int(loads.Add(1)) << 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats []time.Duration
		ferr error
	)
	start := time.Now()
	end := start.Add(d)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine []time.Duration
			for i := int64(1); time.Now().Before(end); i++ {
				t0 := time.Now()
				if err := send(run, w, i); err != nil {
					mu.Lock()
					ferr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ferr != nil {
		return loadResult{}, ferr
	}
	return loadResult{RPS: float64(len(lats)) / elapsed.Seconds(), Lat: summarize(lats)}, nil
}

func runFront(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	dir, err := certsDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	agentd, err := startRole(ctx, roleFrontAgentd, cfg, dir, logw)
	if err != nil {
		return nil, err
	}
	defer agentd.stop()
	stock, err := startRole(ctx, roleFrontStock, cfg, dir, logw)
	if err != nil {
		return nil, err
	}
	defer stock.stop()
	clients := map[*roleProc]*http.Client{}
	for _, r := range []*roleProc{agentd, stock} {
		if clients[r], err = benchClient(dir, 16); err != nil {
			return nil, err
		}
	}
	conn, err := grpcBenchConn(dir, agentd.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	gc := a2apb.NewA2AServiceClient(conn) // one connection, as a peer's client holds
	// agentd's HTTP+JSON binding gets a client of its own, so each binding
	// keeps its own keep-alive connections.
	restClient, err := benchClient(dir, 16)
	if err != nil {
		return nil, err
	}
	defer restClient.CloseIdleConnections()
	// Warm up: connections, TLS sessions, code paths.
	for _, r := range []*roleProc{agentd, stock} {
		if _, err := load(ctx, clients[r], r.url, 16, min(cfg.FrontDuration/4, 500*time.Millisecond)); err != nil {
			return nil, err
		}
	}
	if _, err := grpcLoad(ctx, gc, 16, min(cfg.FrontDuration/4, 500*time.Millisecond)); err != nil {
		return nil, err
	}
	if _, err := restLoad(ctx, restClient, agentd.url, 16, min(cfg.FrontDuration/4, 500*time.Millisecond)); err != nil {
		return nil, err
	}
	var rounds []frontRound
	for r := 0; r < cfg.Rounds; r++ {
		var fr frontRound
		for _, conc := range []int{1, 16} {
			order := []*roleProc{agentd, stock}
			if (r+conc)%2 == 1 {
				order = []*roleProc{stock, agentd}
			}
			for _, srv := range order {
				res, err := load(ctx, clients[srv], srv.url, conc, cfg.FrontDuration)
				if err != nil {
					return nil, err
				}
				switch {
				case srv == agentd && conc == 1:
					fr.Agentd1 = res
				case srv == agentd:
					fr.Agentd16 = res
				case conc == 1:
					fr.Stock1 = res
				default:
					fr.Stock16 = res
				}
			}
			// The same run: agentd's SendMessage over gRPC and over HTTP+JSON.
			gres, err := grpcLoad(ctx, gc, conc, cfg.FrontDuration)
			if err != nil {
				return nil, err
			}
			rres, err := restLoad(ctx, restClient, agentd.url, conc, cfg.FrontDuration)
			if err != nil {
				return nil, err
			}
			if conc == 1 {
				fr.GRPC1, fr.REST1 = gres, rres
			} else {
				fr.GRPC16, fr.REST16 = gres, rres
			}
		}
		rounds = append(rounds, fr)
		fmt.Fprintf(logw, "bench: front round %d: %+v\n", r+1, fr)
	}
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	return rounds, nil
}

func frontRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[frontRound](raw)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, c := range []struct {
		conc                      int
		agentd, stock, grpc, rest func(frontRound) loadResult
	}{
		{1, func(r frontRound) loadResult { return r.Agentd1 }, func(r frontRound) loadResult { return r.Stock1 }, func(r frontRound) loadResult { return r.GRPC1 }, func(r frontRound) loadResult { return r.REST1 }},
		{16, func(r frontRound) loadResult { return r.Agentd16 }, func(r frontRound) loadResult { return r.Stock16 }, func(r frontRound) loadResult { return r.GRPC16 }, func(r frontRound) loadResult { return r.REST16 }},
	} {
		x := medianOf(rounds, func(r frontRound) float64 { return ratio(c.agentd(r).RPS, c.stock(r).RPS) })
		goal := "goal >= 1.5x: met"
		if !(x >= 1.5) {
			goal = "goal >= 1.5x: missed"
		}
		rows = append(rows,
			row{fig: 2, what: fmt.Sprintf("A2A message/send, mTLS keep-alive, concurrency %d: agentd's front", c.conc),
				p50:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.agentd(r).Lat.P50 })),
				p99:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.agentd(r).Lat.P99 })),
				other: fmtRPS(medianOf(rounds, func(r frontRound) float64 { return c.agentd(r).RPS })),
				ratio: fmtX(x) + " the stock server's req/s; " + goal},
			row{fig: 2, what: fmt.Sprintf("A2A message/send, mTLS keep-alive, concurrency %d: stock a2a-go v0.3.3", c.conc),
				p50:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.stock(r).Lat.P50 })),
				p99:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.stock(r).Lat.P99 })),
				other: fmtRPS(medianOf(rounds, func(r frontRound) float64 { return c.stock(r).RPS }))},
		)
		g := medianOf(rounds, func(r frontRound) float64 { return ratio(c.grpc(r).RPS, c.agentd(r).RPS) })
		goal = "goal >= 0.83x (within 1.2x): met"
		if !(g >= 1/1.2) {
			goal = "goal >= 0.83x (within 1.2x): missed"
		}
		rows = append(rows, row{fig: 2, what: fmt.Sprintf("A2A 1.0 SendMessage over gRPC, mTLS keep-alive, concurrency %d: agentd's front", c.conc),
			p50:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.grpc(r).Lat.P50 })),
			p99:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.grpc(r).Lat.P99 })),
			other: fmtRPS(medianOf(rounds, func(r frontRound) float64 { return c.grpc(r).RPS })),
			ratio: fmtX(g) + " JSON-RPC's req/s; " + goal})
		if c.rest(rounds[0]).RPS == 0 {
			continue // a run from before the HTTP+JSON binding
		}
		// HTTP+JSON against JSON-RPC: the goal is at most 1.2x slower, a
		// ratio of at least 1/1.2.
		xr := medianOf(rounds, func(r frontRound) float64 { return ratio(c.rest(r).RPS, c.agentd(r).RPS) })
		goal = "goal >= 0.83x (within 1.2x): met"
		if !(xr >= 1/1.2) {
			goal = "goal >= 0.83x (within 1.2x): missed"
		}
		rows = append(rows, row{fig: 2, what: fmt.Sprintf("A2A 1.0 SendMessage over HTTP+JSON, mTLS keep-alive, concurrency %d: agentd's front", c.conc),
			p50:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.rest(r).Lat.P50 })),
			p99:   fmtMS(medianOf(rounds, func(r frontRound) float64 { return c.rest(r).Lat.P99 })),
			other: fmtRPS(medianOf(rounds, func(r frontRound) float64 { return c.rest(r).RPS })),
			ratio: fmtX(xr) + " agentd's JSON-RPC req/s; " + goal})
	}
	return rows, nil
}

func fmtRPS(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " req/s" }
