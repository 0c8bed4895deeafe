package supervisor

import "slices"

// The children's environment is fixed but for Config.KeyEnv, the API keys of
// the endpoints an agents file declares, which a SIGHUP reload may change (a
// rotated key file, an endpoint added). Each version is an envSet, swapped
// whole: a child takes the version in force when it is started, and keeps it
// for its life. A warm child is started before it has work, so one started
// with an older version is retired instead of handed out (pool.go): a spawn
// after SetKeyEnv returns never gets the old keys.

// envSet is one version of the children's environment. It is never modified
// once stored; its address tells versions apart.
type envSet struct {
	vars []string // the supervisor's base environment, then the key entries
	keys []string // the key entries, as SetKeyEnv was given them
}

// newEnvSet returns the version of the environment with keys.
func (s *Supervisor) newEnvSet(keys []string) *envSet {
	keys = slices.Clone(keys)
	vars := append(append(make([]string, 0, len(s.baseEnv)+len(keys)), s.baseEnv...), keys...)
	return &envSet{vars: vars, keys: keys}
}

// SetKeyEnv replaces Config.KeyEnv: subagents started from now on get keys
// (VAR=value entries) beside Config.Env; those running keep the environment
// they started with. The warm pool's children started with other keys are
// retired (SIGKILLed: they hold no work) and replaced. Keys equal to those in
// force change nothing. Exec children never get them. Safe for concurrent use.
func (s *Supervisor) SetKeyEnv(keys []string) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if slices.Equal(s.env.Load().keys, keys) {
		return
	}
	s.env.Store(s.newEnvSet(keys))
	s.pool.retireStale()
}

// current reports whether envs is the version of the environment in force.
func (s *Supervisor) current(envs *envSet) bool { return s.env.Load() == envs }
