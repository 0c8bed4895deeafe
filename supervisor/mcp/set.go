package mcp

import (
	"context"
	"sync"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// Set is the configured MCP servers, each keeping its session healthy in the
// background once Start is called. It is safe for concurrent use. Create it
// with NewSet; the zero value is not usable.
type Set struct {
	opts    Options
	servers []*Server // in configuration order

	mu      sync.Mutex // guards started, cancel
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// NewSet returns the servers of cfg, not yet connecting. It checks cfg.
func NewSet(cfg Config, opts Options) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts.setDefaults()
	s := &Set{opts: opts}
	for _, sc := range cfg.Servers {
		s.servers = append(s.servers, newServer(sc, &s.opts))
	}
	return s, nil
}

// Start begins connecting every server in the background; each keeps
// reconnecting until Close. Calling it again does nothing.
func (s *Set) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, srv := range s.servers {
		s.wg.Add(2)
		go func() {
			defer s.wg.Done()
			srv.run(ctx)
		}()
		go func() {
			defer s.wg.Done()
			srv.subscriptions(ctx)
		}()
	}
}

// Close stops reconnecting, closes every session and waits for the background
// work to end. In-flight calls fail as tool errors.
func (s *Set) Close() {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
}

// Server returns the server called name.
func (s *Set) Server(name string) (*Server, bool) {
	for _, srv := range s.servers {
		if srv.cfg.Name == name {
			return srv, true
		}
	}
	return nil, false
}

// ToolServers returns the servers by name, for supervisor.Config.Tools.
func (s *Set) ToolServers() map[string]supervisor.ToolServer {
	out := make(map[string]supervisor.ToolServer, len(s.servers))
	for _, srv := range s.servers {
		out[srv.cfg.Name] = srv
	}
	return out
}

// WaitRequired waits until every required (not optional) server has a
// session and every optional one has finished its first connect attempt, or
// ctx ends; then it returns an *UnavailableError naming each required server
// still down with its last error.
func (s *Set) WaitRequired(ctx context.Context) error {
	for _, srv := range s.servers {
		for ctx.Err() == nil {
			srv.mu.Lock()
			settled := srv.cs != nil || (srv.cfg.Optional && srv.tried)
			changed := srv.changed
			srv.mu.Unlock()
			if settled {
				break
			}
			select {
			case <-changed:
			case <-ctx.Done():
			}
		}
	}
	down := make(map[string]error)
	for _, srv := range s.servers {
		if st := srv.state(); st.cs == nil && !srv.cfg.Optional {
			down[srv.cfg.Name] = st.lastErr
		}
	}
	if len(down) > 0 {
		return &UnavailableError{Down: down}
	}
	return nil
}

// Ready reports whether every required server has connected at least once
// (so its tools are known). A server lost later does not make the Set
// unready: its calls fail as tool errors while it reconnects.
func (s *Set) Ready() bool {
	for _, srv := range s.servers {
		if !srv.state().everUp && !srv.cfg.Optional {
			return false
		}
	}
	return true
}

// Grant returns the root grant: every tool each server last listed, and the
// reads of its resources ({SERVER, api.ResourcesTool}) when it has resources,
// narrowed for a server named in subset to the entries named there (a server
// narrowed without api.ResourcesTool grants no resource read). missing are the
// subset's entries that their (listed) server does not offer; a server never
// listed contributes nothing and reports nothing missing.
func (s *Set) Grant(subset map[string][]string) (grant, missing []api.ToolRef) {
	for _, srv := range s.servers {
		if !srv.state().everUp {
			continue
		}
		listed := srv.Tools()
		if srv.servesResources() {
			listed = append(listed, api.ResourcesTool)
		}
		want, narrowed := subset[srv.cfg.Name]
		if !narrowed {
			for _, t := range listed {
				grant = append(grant, api.ToolRef{Server: srv.cfg.Name, Tool: t})
			}
			continue
		}
		have := make(map[string]bool, len(listed))
		for _, t := range listed {
			have[t] = true
		}
		seen := make(map[string]bool, len(want))
		for _, t := range want {
			if seen[t] {
				continue
			}
			seen[t] = true
			ref := api.ToolRef{Server: srv.cfg.Name, Tool: t}
			if have[t] {
				grant = append(grant, ref)
			} else {
				missing = append(missing, ref)
			}
		}
	}
	return grant, missing
}
