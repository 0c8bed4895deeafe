package server

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/go-chi/chi/v5"
)

// DefaultMaxBody is the default request body cap.
const DefaultMaxBody = 8 << 20

// Config configures the HTTP front.
type Config struct {
	// Handler serves the A2A methods.
	Handler a2asrv.RequestHandler
	// Card is the agent card served at /.well-known/agent-card.json.
	Card *a2a.AgentCard
	// Methods are extra JSON-RPC methods (the a2a.* operator family),
	// dispatched by name before the A2A methods.
	Methods map[string]Method
	// MaxBody caps request bodies; default DefaultMaxBody.
	MaxBody int64
	// Auth authenticates and authorizes callers of the JSON-RPC endpoint; nil
	// admits everyone as an anonymous peer (loopback development mode). The
	// Methods are served to operators only; anyone else gets -32601.
	Auth *Auth
	// Healthy and Ready report liveness and readiness; nil means always.
	Healthy func() bool
	Ready   func() bool
	Log     *slog.Logger
}

// Handler returns the service's HTTP handler: POST / is the JSON-RPC endpoint,
// GET /.well-known/agent-card.json the card, /healthz and /readyz the probes.
func Handler(cfg Config) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	card, err := json.Marshal(cfg.Card)
	if err != nil {
		panic("server: agent card does not encode: " + err.Error())
	}
	rpc := &rpcHandler{h: cfg.Handler, extra: operatorOnly(cfg.Methods), maxBody: cfg.MaxBody}
	auth := cfg.Auth
	if auth == nil {
		auth = &Auth{Open: true, Log: cfg.Log}
	}
	r := chi.NewRouter()
	r.Use(checkOrigin)
	r.Method(http.MethodPost, "/", auth.Middleware(rpc))
	serveCard := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(card)
	}
	r.Get("/.well-known/agent-card.json", serveCard)
	r.Get("/.well-known/agent.json", serveCard) // the pre-0.3 location
	r.Get("/healthz", probe(cfg.Healthy))
	r.Get("/readyz", probe(cfg.Ready))
	return r
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
