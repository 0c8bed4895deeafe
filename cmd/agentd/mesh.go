package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/agentd/agentd/a2a/peer"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

// meshConfig is serve's settings for the A2A mesh: remote peers, routing
// rules, push notification policy and the blocking-send bound.
type meshConfig struct {
	Peers        []peer.Config   // --peer, parsed as given
	Routes       []delegate.Rule // --route, parsed as given
	PushAllowNet string          // comma-separated CIDRs
	SendWait     time.Duration
	InputTimeout time.Duration // how long a task's question waits for its caller's answer (0: the asker's deadline)
}

func addMesh(f *cli.Flags, m *meshConfig) {
	f.EnvFuncList("peer", "AGENT_PEERS", "a remote A2A peer, NAME=URL[,spiffe=ID][,token-file=PATH][,timeout=DURATION][,version=0.3|1.0][,binding=JSONRPC|HTTP+JSON|GRPC]; repeatable (env: ';'-separated); its provider is peer:NAME", func(s string) error {
		p, err := peer.ParseSpec(s)
		if err != nil {
			return err
		}
		m.Peers = append(m.Peers, p)
		return nil
	})
	f.EnvFuncList("route", "AGENT_ROUTES", "a routing rule SKILL=PROVIDER (SKILL * matches every request); repeatable (env: ';'-separated); the first match wins, else local", func(s string) error {
		r, err := delegate.ParseRule(s)
		if err != nil {
			return err
		}
		m.Routes = append(m.Routes, r)
		return nil
	})
	f.EnvString(&m.PushAllowNet, "push-allow-net", "AGENT_PUSH_ALLOW_NET", "", "comma-separated CIDRs push webhooks may reach although loopback, link-local or private (all refused by default)")
	f.EnvDuration(&m.InputTimeout, "input-timeout", "AGENT_INPUT_TIMEOUT", 0, "longest a task's question (input-required) waits for its caller's answer before the task fails, cause input_timeout (0: no bound; the wait does not count against the asking subagent's deadline unless --input-charges-deadline)")
	f.EnvDuration(&m.SendWait, "send-wait", "AGENT_SEND_WAIT", 0, "longest a blocking send (message/send, SendMessage) holds the request before answering with the running task (0: until the task ends, as A2A 0.3 and 1.0 say; a bound departs from that, for both)")
}

// validate checks the mesh settings and names the bad one; tlsOn says whether
// the service has an SVID of its own, which a peer called over mTLS needs.
func (m *meshConfig) validate(tlsOn bool) error {
	names := map[string]bool{}
	for _, p := range m.Peers {
		if names[p.Name] {
			return fmt.Errorf("--peer %s: configured twice", p.Name)
		}
		names[p.Name] = true
		// A secret never sits on argv: a peer's credentials come from its
		// token-file.
		if u, err := url.Parse(p.URL); err == nil && u.User != nil {
			return fmt.Errorf("--peer %s: credentials in the URL are refused; give token-file=PATH", p.Name)
		}
		if p.SPIFFEID != "" && !tlsOn {
			return fmt.Errorf("--peer %s: spiffe=%s needs this service's own SVID for mTLS (--spiffe-socket, or --tls-cert/--tls-key/--tls-bundle)", p.Name, p.SPIFFEID)
		}
	}
	for _, r := range m.Routes {
		name, isPeer := strings.CutPrefix(r.Provider, peer.Prefix)
		if r.Provider != delegate.LocalName && !(isPeer && names[name]) {
			return fmt.Errorf("--route %s=%s: no such provider (local, or peer:NAME of a --peer)", r.Skill, r.Provider)
		}
	}
	if _, err := m.pushAllow(); err != nil {
		return err
	}
	if m.InputTimeout < 0 {
		return fmt.Errorf("--input-timeout must not be negative (got %s)", m.InputTimeout)
	}
	if m.SendWait < 0 {
		return fmt.Errorf("--send-wait must not be negative (got %s)", m.SendWait)
	}
	return nil
}

// pushAllow is --push-allow-net as prefixes.
func (m *meshConfig) pushAllow() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range cli.CommaList(m.PushAllowNet) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--push-allow-net %q: want CIDRs such as 127.0.0.0/8,::1/128", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// registerPeers adds one peer provider per --peer and the routing rules, and
// reads each peer's agent card in the background until ctx ends. src is the
// service's own identity (nil without TLS): a peer with spiffe=ID is called
// over mTLS with it, and must present that ID.
func (m *meshConfig) registerPeers(ctx context.Context, router *delegate.Router, src tlsconfig.Source, log *slog.Logger) error {
	clients := peer.Clients(src)
	for _, pc := range m.Peers {
		pc.Log = log
		p, err := peer.New(pc, clients)
		if err != nil {
			return cli.UsageError("--peer %s: %v", pc.Name, err)
		}
		if err := router.Register(p); err != nil {
			return err
		}
		go func() {
			if err := p.Refresh(ctx); err != nil && ctx.Err() == nil {
				log.Warn("peer card not read yet; retried on first use", "peer", pc.Name, "err", err)
			}
			<-ctx.Done()
			p.Close() // a gRPC client's connections, once its last delegation ends
		}()
	}
	router.SetRules(m.Routes)
	return nil
}

// providers are the providers the --peer flags make (peer:NAME).
func (m *meshConfig) providers() []string {
	var out []string
	for _, p := range m.Peers {
		out = append(out, "peer:"+p.Name)
	}
	return out
}
