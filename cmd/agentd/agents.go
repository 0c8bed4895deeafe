package main

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/agentsfile"
)

// declared is serve's --agents file (docs/intelligence.md, "Declared
// agents"): the agents in force, replaced as a whole by a SIGHUP that loads
// the file again; a file that does not load leaves them in force. Without
// --agents, agentd runs as its flags say and the card is the default one.
// Safe for concurrent use.
type declared struct {
	path  string
	log   *slog.Logger
	peers []string // the configured providers (peer:NAME) a type's tools.peers may name
	cur   atomic.Pointer[declaredAgents]
	// base is the card's part that the file does not declare (its URL,
	// instance, security), set once the main listener is open.
	base atomic.Pointer[a2abind.CardConfig]
}

// declaredAgents is one loaded version of the file and the card it makes.
type declaredAgents struct {
	cfg  *agentsfile.Config
	card atomic.Pointer[a2a.AgentCard] // made on first use, once base is set
}

// msgAgentsLoaded is logged with the file's version each time it loads (the
// e2e tests read it).
const msgAgentsLoaded = "agents file loaded"

// openAgents loads --agents at start: a file that does not load, or whose
// types name a peer that is not configured (--peer), is bad config (exit 2),
// the error naming the key. It returns nil without a file.
func openAgents(path string, peers []string, log *slog.Logger) (*declared, error) {
	if path == "" {
		return nil, nil
	}
	d := &declared{path: path, log: log, peers: peers}
	cfg, err := d.load()
	if err != nil {
		return nil, cli.UsageError("--agents %s: %v", path, err)
	}
	d.cur.Store(&declaredAgents{cfg: cfg})
	d.logLoaded("", cfg)
	return d, nil
}

// load reads the file and checks its types' peers against the configured
// ones.
func (d *declared) load() (*agentsfile.Config, error) {
	cfg, err := agentsfile.Load(d.path)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		for i, p := range cfg.Types[name].Peers {
			if !slices.Contains(d.peers, p) {
				return nil, fmt.Errorf("%w: agents.types.%s.tools.peers[%d]: %q is not a configured peer (--peer)", agentsfile.ErrInvalid, name, i, p)
			}
		}
	}
	return cfg, nil
}

func (d *declared) logLoaded(prefix string, cfg *agentsfile.Config) {
	d.log.Info(prefix+msgAgentsLoaded, "file", d.path, "version", cfg.Version, "types", len(cfg.Types), "skills", len(cfg.Card.Skills))
}

// reload is SIGHUP: the file is loaded again and, when it loads, replaces
// the agents and the card in force at once; else they stay, logged at
// ERROR naming the bad key and the version kept.
func (d *declared) reload() {
	cfg, err := d.load()
	if err != nil {
		d.log.Error("SIGHUP: the agents file did not load; the agents in force stay", "file", d.path, "version", d.cur.Load().cfg.Version, "err", err)
		return
	}
	d.cur.Store(&declaredAgents{cfg: cfg})
	d.logLoaded("SIGHUP: ", cfg)
}

// typeFor is the agent type a root message naming skill runs as.
func (d *declared) typeFor(skill string) *api.AgentType {
	return d.cur.Load().cfg.TypeFor(skill)
}

// typeNamed is the agent type a spawn names.
func (d *declared) typeNamed(name string) (*api.AgentType, bool) {
	return d.cur.Load().cfg.Type(name)
}

// card is the agent card of the file in force over base.
func (d *declared) card() *a2a.AgentCard {
	cur := d.cur.Load()
	if c := cur.card.Load(); c != nil {
		return c
	}
	cc := *d.base.Load()
	f := cur.cfg.Card
	if f.Name != "" {
		cc.Name = f.Name
	}
	if f.Description != "" {
		cc.Description = f.Description
	}
	cc.DocumentationURL = f.DocumentationURL
	if f.Skills != nil {
		cc.Skills = []a2a.AgentSkill{}
		for _, s := range f.Skills {
			tags := s.Tags
			if tags == nil {
				tags = []string{}
			}
			cc.Skills = append(cc.Skills, a2a.AgentSkill{
				ID: s.ID, Name: s.Name, Description: s.Description, Tags: tags, Examples: s.Examples,
				InputModes: []string{"text/plain", "application/json"}, OutputModes: []string{"text/plain", "application/json"},
			})
		}
	}
	card := a2abind.Card(cc)
	if !cur.card.CompareAndSwap(nil, card) {
		return cur.card.Load()
	}
	return card
}
