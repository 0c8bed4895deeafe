package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
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
	// setKeys hands the keys of a file that loads to the children started
	// from then on (Supervisor.SetKeyEnv): set once the supervisor is built,
	// before any reload.
	setKeys func(env []string)
	// base is the card's part that the file does not declare (its URL,
	// instance, security), set once the main listener is open.
	base atomic.Pointer[a2abind.CardConfig]
}

// declaredAgents is one loaded version of the file and the card it makes.
type declaredAgents struct {
	cfg  *agentsfile.Config
	keys []string                      // the child environment entries of its endpoints' keys (agentsfile.Config.ReadKeys); never logged
	card atomic.Pointer[a2a.AgentCard] // made on first use, once base is set
}

// msgAgentsLoaded is logged with the file's version each time it loads (the
// e2e tests read it).
const msgAgentsLoaded = "agents file loaded"

// openAgents loads --agents at start: a file that does not load, whose
// types name a peer that is not configured (--peer), or one of whose
// endpoints' keys cannot be read (an unset key_env, an unreadable or empty
// key_file) is bad config (exit 2), the error naming the key. It returns nil
// without a file.
func openAgents(path string, peers []string, log *slog.Logger) (*declared, error) {
	if path == "" {
		return nil, nil
	}
	d := &declared{path: path, log: log, peers: peers}
	cur, err := d.load()
	if err != nil {
		return nil, cli.UsageError("--agents %s: %v", path, err)
	}
	d.cur.Store(cur)
	d.logLoaded("", cur.cfg)
	return d, nil
}

// load reads the file, checks its types' peers against the configured ones
// and reads its endpoints' keys.
func (d *declared) load() (*declaredAgents, error) {
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
	keys, err := cfg.ReadKeys(os.Getenv)
	if err != nil {
		return nil, err
	}
	return &declaredAgents{cfg: cfg, keys: keys}, nil
}

// keyEnv is the child environment entries of the keys of the file in force;
// nil without --agents.
func (d *declared) keyEnv() []string {
	if d == nil {
		return nil
	}
	return d.cur.Load().keys
}

func (d *declared) logLoaded(prefix string, cfg *agentsfile.Config) {
	d.log.Info(prefix+msgAgentsLoaded, "file", d.path, "version", cfg.Version, "types", len(cfg.Types), "skills", len(cfg.Card.Skills))
}

// reload is SIGHUP: the file is loaded again and, when it loads, replaces
// the agents and the card in force at once; else they stay, logged at
// ERROR naming the bad key and the version kept.
//
// The keys are handed to the supervisor before the types that name their
// variables are in force, so no child of a new type starts without its key.
// A child that inherits its parent's intelligence after a reload gets the
// key its source holds now, or none when the file no longer names the
// source.
func (d *declared) reload() {
	cur, err := d.load()
	if err != nil {
		d.log.Error("SIGHUP: the agents file did not load; the agents in force stay", "file", d.path, "version", d.cur.Load().cfg.Version, "err", err)
		return
	}
	if d.setKeys != nil {
		d.setKeys(cur.keys)
	}
	d.cur.Store(cur)
	d.logLoaded("SIGHUP: ", cur.cfg)
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
