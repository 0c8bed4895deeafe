package supervisor

import "fmt"

// Caps are the limits the subagent.spawn chokepoint enforces. Operators may
// read and adjust them at run time within the bounds Validate checks.
type Caps struct {
	MaxDepth          int     // deepest depth a subagent may have; the root is depth 0
	MaxChildren       int     // children per node
	MaxTotalSubagents int     // subagents per tree, the root included
	MaxInflight       int     // unfinished async children per parent
	SpawnBurst        int     // token bucket: burst of spawns per tree
	SpawnRate         float64 // token bucket: spawns per second per tree
	TreeTokenCeiling  int64   // tokens per tree
}

// DefaultCaps are the chokepoint's conservative defaults (docs/ARCHITECTURE.md
// §5.1).
var DefaultCaps = Caps{
	MaxDepth:          4,
	MaxChildren:       8,
	MaxTotalSubagents: 64,
	MaxInflight:       4,
	SpawnBurst:        8,
	SpawnRate:         2,
	TreeTokenCeiling:  2_000_000,
}

// Upper bounds an operator cannot raise the caps past.
const (
	maxDepthBound      = 16
	maxChildrenBound   = 256
	maxTotalBound      = 4096
	maxInflightBound   = 256
	maxBurstBound      = 1024
	maxRateBound       = 1000
	maxTreeTokensBound = 1 << 40
)

func (c Caps) withDefaults() Caps { return DefaultCaps.Merge(c) }

// Merge returns c with every positive field of o taking its place.
func (c Caps) Merge(o Caps) Caps {
	d := c
	c = o
	if c.MaxDepth > 0 {
		d.MaxDepth = c.MaxDepth
	}
	if c.MaxChildren > 0 {
		d.MaxChildren = c.MaxChildren
	}
	if c.MaxTotalSubagents > 0 {
		d.MaxTotalSubagents = c.MaxTotalSubagents
	}
	if c.MaxInflight > 0 {
		d.MaxInflight = c.MaxInflight
	}
	if c.SpawnBurst > 0 {
		d.SpawnBurst = c.SpawnBurst
	}
	if c.SpawnRate > 0 {
		d.SpawnRate = c.SpawnRate
	}
	if c.TreeTokenCeiling > 0 {
		d.TreeTokenCeiling = c.TreeTokenCeiling
	}
	return d
}

// Validate checks that every cap is positive and within its bound.
func (c Caps) Validate() error {
	check := []struct {
		name  string
		v     float64
		bound float64
	}{
		{"max_depth", float64(c.MaxDepth), maxDepthBound},
		{"max_children", float64(c.MaxChildren), maxChildrenBound},
		{"max_total_subagents", float64(c.MaxTotalSubagents), maxTotalBound},
		{"max_inflight", float64(c.MaxInflight), maxInflightBound},
		{"spawn_burst", float64(c.SpawnBurst), maxBurstBound},
		{"spawn_rate", c.SpawnRate, maxRateBound},
		{"tree_token_ceiling", float64(c.TreeTokenCeiling), maxTreeTokensBound},
	}
	for _, ck := range check {
		if ck.v <= 0 || ck.v > ck.bound {
			return &CapError{Name: ck.name, Value: ck.v, Bound: ck.bound}
		}
	}
	return nil
}

// CapError reports a cap outside its bounds. Name is the cap's snake_case name
// (max_depth, spawn_rate, ...), so callers can name the setting that set it.
type CapError struct {
	Name  string
	Value float64
	Bound float64
}

func (e *CapError) Error() string {
	return fmt.Sprintf("supervisor: cap %s = %v: must be in (0, %v]", e.Name, e.Value, e.Bound)
}

// Caps returns the caps in force.
func (s *Supervisor) Caps() Caps {
	s.capsMu.Lock()
	defer s.capsMu.Unlock()
	return s.caps
}

// SetCaps replaces the caps after validating them; running subagents keep what
// they were granted, new spawns see the new caps.
func (s *Supervisor) SetCaps(c Caps) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.capsMu.Lock()
	s.caps = c
	s.capsMu.Unlock()
	return nil
}
