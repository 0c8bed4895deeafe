package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/delegate"
	"github.com/agentd/agentd/peer"
	"github.com/agentd/agentd/tlsconfig"
)

// mesh holds serve's settings for the A2A mesh: remote peers, routing rules,
// push notification policy and the blocking-send bound.
type mesh struct {
	peers     []peer.Config
	routes    []delegate.Rule
	pushNets  *string
	sendWait  *time.Duration
	pushAllow []netip.Prefix
	errs      []error
}

func addMesh(f *flags) *mesh {
	m := &mesh{}
	addList := func(name, env, usage string, add func(string) error) {
		f.Func(name, usage+envNote(env), func(s string) error {
			if err := add(s); err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
			return nil
		})
		if v, ok := os.LookupEnv(env); ok {
			for _, item := range strings.Split(v, ";") {
				if strings.TrimSpace(item) == "" {
					continue
				}
				if err := add(item); err != nil {
					m.errs = append(m.errs, fmt.Errorf("%s: %w", env, err))
				}
			}
		}
	}
	addList("peer", "AGENT_PEERS", "a remote A2A peer, NAME=URL[,spiffe=ID][,token-file=PATH][,timeout=DURATION]; repeatable (env: ';'-separated); its provider is peer:NAME", func(s string) error {
		p, err := peer.ParseSpec(s)
		if err != nil {
			return err
		}
		m.peers = append(m.peers, p)
		return nil
	})
	addList("route", "AGENT_ROUTES", "a routing rule SKILL=PROVIDER (SKILL * matches every request); repeatable (env: ';'-separated); the first match wins, else local", func(s string) error {
		r, err := delegate.ParseRule(s)
		if err != nil {
			return err
		}
		m.routes = append(m.routes, r)
		return nil
	})
	m.pushNets = f.string("push-allow-net", "AGENT_PUSH_ALLOW_NET", "", "comma-separated CIDRs push webhooks may reach although loopback, link-local or private (all refused by default)")
	m.sendWait = f.duration("send-wait", "AGENT_SEND_WAIT", 0, "longest a blocking message/send holds the request before answering with the running task (0: until the task ends)")
	return m
}

// validate checks the mesh settings and names the bad one.
func (m *mesh) validate() error {
	if len(m.errs) > 0 {
		return usageError("%v", m.errs[0])
	}
	names := map[string]bool{}
	for _, p := range m.peers {
		if names[p.Name] {
			return usageError("--peer %s: configured twice", p.Name)
		}
		names[p.Name] = true
		// A secret never sits on argv: a peer's credentials come from its
		// token-file.
		if u, err := url.Parse(p.URL); err == nil && u.User != nil {
			return usageError("--peer %s: credentials in the URL are refused; give token-file=PATH", p.Name)
		}
	}
	for _, r := range m.routes {
		name, isPeer := strings.CutPrefix(r.Provider, peer.Prefix)
		if r.Provider != delegate.LocalName && !(isPeer && names[name]) {
			return usageError("--route %s=%s: no such provider (local, or peer:NAME of a --peer)", r.Skill, r.Provider)
		}
	}
	for _, s := range strings.Split(*m.pushNets, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return usageError("--push-allow-net %q: want CIDRs such as 127.0.0.0/8,::1/128", s)
		}
		m.pushAllow = append(m.pushAllow, p.Masked())
	}
	if *m.sendWait < 0 {
		return usageError("--send-wait must not be negative (got %s)", *m.sendWait)
	}
	return nil
}

// registerPeers adds one peer provider per --peer and the routing rules, and
// reads each peer's agent card in the background. src is the service's own
// identity (nil without TLS): a peer with spiffe=ID is called over mTLS with
// it, and must present that ID.
func (m *mesh) registerPeers(router *delegate.Router, src tlsconfig.Source, log *slog.Logger) error {
	clients := peer.Clients(src)
	for _, pc := range m.peers {
		pc.Log = log
		p, err := peer.New(pc, clients)
		if err != nil {
			return usageError("--peer %s: %v", pc.Name, err)
		}
		if err := router.Register(p); err != nil {
			return err
		}
		go func() {
			if err := p.Refresh(context.Background()); err != nil {
				log.Warn("peer card not read yet; retried on first use", "peer", pc.Name, "err", err)
			}
		}()
	}
	router.SetRules(m.routes)
	return nil
}
