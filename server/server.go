package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2arest"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
)

// Config configures the HTTP front.
type Config struct {
	// Handler serves the A2A methods.
	Handler a2asrv.RequestHandler
	// Card is the agent card served at /.well-known/agent-card.json.
	Card *a2a.AgentCard
	// CardFunc, if set, is asked for the card on each request instead of
	// Card (the agents file's card, which SIGHUP may replace); a card it
	// returns again is not encoded again.
	CardFunc func() *a2a.AgentCard
	// Methods are extra JSON-RPC methods (the a2a.* operator family), served
	// whatever the request's A2A-Version says.
	Methods map[string]Method
	// MaxMessage is the message size limit: a message (message/send,
	// message/stream, SendMessage, SendStreamingMessage), measured as
	// encoding/json writes it, over this many bytes is refused with -32602
	// naming the limit, and a request body over BodyLimit(MaxMessage) with
	// HTTP 413. Default api.DefaultMaxMessage; the supervisor's frame limit
	// is api.FrameLimit of the same value, so an admitted message always
	// reaches its child.
	MaxMessage int
	// ReserveMessage, if set, is asked before a request's body is read (the
	// JSON-RPC and HTTP+JSON bindings; a gRPC request message before it is
	// decoded, answered RESOURCE_EXHAUSTED when shed) for the memory its n bytes may cost
	// (n is the Content-Length, or the body limit when the length is not
	// given); an error (an *admit.ShedError) is answered 429 with Retry-After
	// without reading the body, and release is called once the request is
	// answered. The admission control's ReserveMessage.
	ReserveMessage func(n int64) (release func(), err error)
	// Blobs, if set, serves stored distillates at GET /blobs/{id}, each to
	// whoever may read (Handler.OnGetTask) the task that stored it.
	Blobs BlobSource
	// Auth authenticates and authorizes callers of the JSON-RPC endpoint; nil
	// admits everyone as an anonymous peer (loopback development mode). The
	// Methods are served to operators only; anyone else gets -32601.
	Auth *Auth
	// Healthy and Ready report liveness and readiness; nil means always.
	Healthy func() bool
	Ready   func() bool
	Log     *slog.Logger
	// SSEKeepAlive is how often an idle event stream gets an SSE comment;
	// default DefaultSSEKeepAlive.
	SSEKeepAlive time.Duration
	// Metrics counts A2A requests and, when set, is served at /metrics to
	// operators only. Every JSON-RPC request gets a server span either way.
	Metrics *telemetry.Metrics
	// Console, if set, serves the operator console under ConsolePath (GET
	// only), to operators only: anyone else gets 403, as for /metrics.
	Console http.Handler
}

// ConsolePath is where the operator console is served.
const ConsolePath = "/ui/"

// Handler returns the service's HTTP handler: POST / is the JSON-RPC endpoint
// (each request a server span, counted in Config.Metrics), GET
// /.well-known/agent-card.json (and the older /.well-known/agent.json) the
// card, /healthz and /readyz the probes, with Config.Blobs GET /blobs/{id}
// the stored distillates, with Config.Metrics GET /metrics and with
// Config.Console GET /ui/ for operators, and every HTTP/2 request of
// Content-Type application/grpc the A2A 1.0 gRPC binding (grpc.go). Every
// request with an Origin header that is not loopback is refused (403).
func Handler(cfg Config) http.Handler {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = api.DefaultMaxMessage
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	card, err := cardJSON(cfg.Card)
	if err != nil {
		panic("server: agent card does not encode: " + err.Error())
	}
	methods := methodTable(cfg.Methods, cfg.Log)
	names := make(map[string]string, len(methods))
	for name := range methods {
		names[name] = name
	}
	rpc := &rpcHandler{h: cfg.Handler, methods: methods, names: names, maxMessage: cfg.MaxMessage, maxBody: BodyLimit(cfg.MaxMessage), keepAlive: cfg.SSEKeepAlive, reserve: cfg.ReserveMessage}
	auth := cfg.Auth
	if auth == nil {
		auth = &Auth{Open: true, Log: cfg.Log}
	}
	unary := newGRPCUnary(&grpcService{h: cfg.Handler, maxMessage: cfg.MaxMessage}, int(BodyLimit(cfg.MaxMessage)), cfg.ReserveMessage)
	gs := telemetry.ServeA2A(cfg.Metrics, grpcHTTP(auth, newGRPC(cfg.Handler, cfg.MaxMessage, nil, cfg.ReserveMessage), unary, cfg.Log))
	r := chi.NewRouter()
	r.Use(checkOrigin)
	endpoint := telemetry.ServeA2A(cfg.Metrics, auth.Middleware(rpc))
	r.Method(http.MethodPost, "/", endpoint)
	serveCard := cachedJSON(card, time.Now()) // cardcache.go: Cache-Control, ETag, 304
	if cfg.CardFunc != nil {
		serveCard = dynamicCard(cfg.CardFunc, cfg.Log)
	}
	r.Get("/.well-known/agent-card.json", serveCard)
	r.Get("/.well-known/agent.json", serveCard) // the pre-0.3 location
	r.Get("/healthz", probe(cfg.Healthy))
	r.Get("/readyz", probe(cfg.Ready))
	// A2A 1.0's HTTP+JSON binding, at the root too (its interface URL is
	// the card's URL): the same authentication, metrics and method table.
	rest := telemetry.ServeA2A(cfg.Metrics, auth.Middleware(restHandler{rh: rpc}))
	for _, p := range a2arest.Prefixes {
		r.Handle(p, rest)
		r.Handle(p+"/*", rest)
	}
	r.NotFound(a2arest.NotFound)
	if cfg.Metrics != nil {
		r.Method(http.MethodGet, MetricsPath, auth.Middleware(operatorHTTP(cfg.Metrics.Handler())))
	}
	if cfg.Console != nil {
		r.Get(strings.TrimSuffix(ConsolePath, "/"), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, ConsolePath, http.StatusMovedPermanently)
		})
		r.Method(http.MethodGet, ConsolePath+"*", auth.Middleware(operatorHTTP(cfg.Console)))
	}
	if cfg.Blobs != nil {
		// The same authentication as the JSON-RPC endpoint, and the same
		// authorization as tasks/get on the task that stored the blob.
		r.Method(http.MethodGet, BlobPath, auth.Middleware(serveBlob(cfg.Blobs, cfg.Handler)))
	}
	// The JSON-RPC endpoint, which every A2A 0.3 and 1.0 JSON-RPC call
	// reaches, is served as the router serves it (the origin check, then
	// the route's handler) without the router's per-request work: its
	// routing context, a copy of the request that carries it, the route's
	// lookup.
	rpcEndpoint := checkOrigin(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case isGRPC(req): // the gRPC binding (grpc.go), whatever the path
			gs.ServeHTTP(w, req)
		case req.Method == http.MethodPost && req.URL.Path == "/" && req.URL.RawPath == "":
			rpcEndpoint.ServeHTTP(w, req)
		default:
			r.ServeHTTP(w, req)
		}
	})
}

// cardJSON encodes the card for both protocol versions: the A2A 0.3 fields
// (url, protocolVersion, preferredTransport) and the A2A 1.0 supportedInterfaces,
// which list the one JSON-RPC endpoint twice, 1.0 first, since it serves both,
// the HTTP+JSON binding of 1.0, whose routes are served from the same URL
// (without its trailing slash, which clients would double), then the 1.0
// gRPC binding on the same listener, as a gRPC target (host:port).
func cardJSON(card *a2a.AgentCard) ([]byte, error) {
	if card == nil {
		return []byte("null"), nil
	}
	b, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	doc["supportedInterfaces"] = []a2av1.AgentInterface{
		{URL: card.URL, ProtocolBinding: string(a2a.TransportProtocolJSONRPC), ProtocolVersion: a2av1.Version},
		{URL: card.URL, ProtocolBinding: string(a2a.TransportProtocolJSONRPC), ProtocolVersion: tasks.Version03},
		{URL: strings.TrimSuffix(card.URL, "/"), ProtocolBinding: string(a2a.TransportProtocolHTTPJSON), ProtocolVersion: a2av1.Version},
	}
	if target := a2agrpc.Target(card.URL); target != "" { // the same listener, as a gRPC target
		doc["supportedInterfaces"] = append(doc["supportedInterfaces"].([]a2av1.AgentInterface),
			a2av1.AgentInterface{URL: target, ProtocolBinding: string(a2a.TransportProtocolGRPC), ProtocolVersion: a2av1.Version})
	}
	return json.Marshal(doc)
}

// dynamicCard serves the card get returns, encoded as cardJSON does, once
// per card.
func dynamicCard(get func() *a2a.AgentCard, log *slog.Logger) http.HandlerFunc {
	type encoded struct {
		card  *a2a.AgentCard
		serve http.HandlerFunc // cachedJSON of the card's bytes
	}
	var last atomic.Pointer[encoded]
	return func(w http.ResponseWriter, r *http.Request) {
		card := get()
		e := last.Load()
		if e == nil || e.card != card {
			b, err := cardJSON(card)
			if err != nil {
				log.Error("the agent card does not encode", "err", err)
				http.Error(w, "the agent card does not encode", http.StatusInternalServerError)
				return
			}
			e = &encoded{card: card, serve: cachedJSON(b, time.Now())}
			last.Store(e)
		}
		e.serve(w, r)
	}
}

// ProbeHandler serves only /healthz and /readyz: the separate probe listener.
func ProbeHandler(healthy, ready func() bool) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", probe(healthy))
	r.Get("/readyz", probe(ready))
	return r
}

func probe(ok func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if ok != nil && !ok() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}
}
