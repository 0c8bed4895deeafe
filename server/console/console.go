package console

import (
	"embed"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// Path is where the console is mounted; every route below is under it.
const Path = "/ui/"

// EventsPath is the route of the snapshot stream.
const EventsPath = Path + "events"

// CSP is the Content-Security-Policy of every console response: only this
// origin's own files, no inline script or style, no plugins, no framing, no
// form posts, no base URL change.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed static
var static embed.FS

// staticFiles are the console's files by route, with their media types.
var staticFiles = map[string]struct{ file, mediaType string }{
	Path:                  {"static/index.html", "text/html; charset=utf-8"},
	Path + "console.js":   {"static/console.js", "text/javascript; charset=utf-8"},
	Path + "console.css":  {"static/console.css", "text/css; charset=utf-8"},
	Path + "icon.svg":     {"static/icon.svg", "image/svg+xml"},
	Path + "index.html":   {"static/index.html", "text/html; charset=utf-8"},
	Path + "console.html": {"static/index.html", "text/html; charset=utf-8"},
}

// Gauge is one of the service's gauges as the console shows it: a value, and
// the bound it counts against when it has one.
type Gauge struct {
	Name  string  `json:"name"`          // a short label, such as "live subagents"
	Value float64 `json:"value"`         // the current value
	Max   float64 `json:"max,omitempty"` // the bound, 0 for none
	Help  string  `json:"help,omitempty"`
}

// Service is the service-wide state the actions change.
type Service struct {
	// Ready is the lame-duck switch: false while an operator has the service
	// report not ready (a2a.LameDuck).
	Ready    bool `json:"ready"`
	InFlight int  `json:"in_flight"` // tasks not yet terminal
}

// Snapshot is one state of the service as the console shows it: the
// a2a.Tree result (its fields inline), the subagents that ended lately,
// newest first, the gauges and the service's state.
type Snapshot struct {
	api.TreeResult
	Ended   []Ended `json:"ended"`
	Gauges  []Gauge `json:"gauges"`
	Service Service `json:"service"`
	// Texts is the tail of each live subagent's streamed model text (of
	// its latest step), by task id.
	Texts map[string]string `json:"texts"`
	// Questions are the questions and approvals tasks wait on (as
	// a2a.Questions lists them), which the page's waiting view answers
	// through a2a.Answer.
	Questions []api.PendingQuestion `json:"questions"`
}

// Event is what one stream event carries: the server's clock when it was
// sent (the page measures deadlines against it) and the snapshot.
type Event struct {
	At       time.Time `json:"at"`
	Snapshot Snapshot  `json:"snapshot"`
}

// Config is what the console shows and how often it looks. Tree is required.
type Config struct {
	// Tree is the live forest (server.Tree of the supervisor).
	Tree func() api.TreeResult
	// Gauges, if set, are the service's gauges.
	Gauges func() []Gauge
	// Service, if set, is the service-wide state.
	Service func() Service
	// Recent, if set, supplies the lately ended subagents and the prompt
	// pushes of the supervisor's changes. Without it the stream pushes on
	// the tick only.
	Recent *Recent
	// Tasks, if set, serves the history (TasksPath) and the task pages
	// (TaskPath); without it they answer 404.
	Tasks Tasks
	// Questions, if set, are the questions tasks wait on (the operator's
	// a2a.Questions).
	Questions func() []api.PendingQuestion
	// Tick is how often a stream diffs the snapshot for changes no hook
	// reports; default DefaultTick.
	Tick time.Duration
	// KeepAlive is how often an idle stream gets an SSE comment; default
	// DefaultKeepAlive.
	KeepAlive time.Duration
	Log       *slog.Logger
}

// Defaults of Config.
const (
	DefaultTick      = 500 * time.Millisecond
	DefaultKeepAlive = 15 * time.Second
	// coalesce is how long a stream waits after a hook's push before it
	// looks, so a burst of changes (a fan-out) is one event.
	coalesce = 25 * time.Millisecond
)

// Console serves the page and its stream. Create it with New; it is safe for
// concurrent use.
type Console struct {
	cfg   Config
	close chan struct{}
	once  sync.Once
}

// New returns the console of cfg.
func New(cfg Config) *Console {
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Console{cfg: cfg, close: make(chan struct{})}
}

// Close ends every open stream (each sends its last snapshot first) and
// makes new ones end at once; the page is still served. Call it when the
// service stops serving, so no stream holds an HTTP shutdown up. It is
// idempotent.
func (c *Console) Close() { c.once.Do(func() { close(c.close) }) }

// Snapshot returns the service's state now.
func (c *Console) Snapshot() Snapshot {
	s := Snapshot{TreeResult: c.cfg.Tree(), Ended: []Ended{}, Gauges: []Gauge{}, Texts: map[string]string{}, Questions: []api.PendingQuestion{}}
	if c.cfg.Recent != nil {
		s.Ended = c.cfg.Recent.Ended()
		s.Texts = c.cfg.Recent.Texts()
		// The supervisor reports a node's end just before it leaves the
		// live tree: a node that ended is shown as ended only.
		gone := make(map[string]bool, len(s.Ended))
		for _, e := range s.Ended {
			gone[e.TaskID] = true
		}
		live := make([]api.TreeNode, 0, len(s.Nodes))
		for _, n := range s.Nodes {
			if !gone[n.TaskID] {
				live = append(live, n)
			}
		}
		s.Nodes = live
	}
	if c.cfg.Gauges != nil {
		s.Gauges = c.cfg.Gauges()
	}
	if c.cfg.Service != nil {
		s.Service = c.cfg.Service()
	}
	if c.cfg.Questions != nil {
		s.Questions = c.cfg.Questions()
	}
	return s
}

// ServeHTTP serves the console's routes (under Path, GET and HEAD only):
// the page and its files, and the stream at EventsPath. Every response
// carries CSP and refuses framing and sniffing.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == EventsPath:
		c.serveEvents(w, r)
		return
	case (r.URL.Path == TasksPath || r.URL.Path == TaskPath) && c.cfg.Tasks != nil:
		if r.URL.Path == TasksPath {
			c.serveHistory(w, r)
		} else {
			c.serveTask(w, r)
		}
		return
	}
	f, ok := staticFiles[r.URL.Path]
	if !ok && strings.HasPrefix(r.URL.Path, TaskPagePath) && len(r.URL.Path) > len(TaskPagePath) {
		// A task's own page is the console's page, which routes on the
		// path (so a reload keeps it).
		f, ok = staticFiles[Path], true
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := static.ReadFile(f.file)
	if err != nil { // every listed file is embedded: a build without them is broken
		http.Error(w, "console file missing", http.StatusInternalServerError)
		return
	}
	h.Set("Content-Type", f.mediaType)
	h.Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}
