package admit

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Priority orders the admission queue: every queued run of a higher priority
// is offered a slot before any of a lower one (within the fair shares, see
// Controller). The zero value is "not given", which Policy.Effective reads as
// Normal.
type Priority int8

// Priorities, lowest first.
const (
	Low    Priority = 1
	Normal Priority = 2
	High   Priority = 3
)

// priorities lists them highest first, the order dispatch looks at them in.
var priorities = [...]Priority{High, Normal, Low}

// String is the priority's name: low, normal or high ("" for none).
func (p Priority) String() string {
	switch p {
	case Low:
		return "low"
	case Normal:
		return "normal"
	case High:
		return "high"
	}
	return ""
}

// ErrBadPriority refuses a priority that is not low, normal or high.
var ErrBadPriority = errors.New("admit: priority must be low, normal or high")

// ParsePriority reads a priority's name; case and surrounding space do not
// matter, and "" is the zero Priority (none given).
func ParsePriority(s string) (Priority, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return 0, nil
	case "low":
		return Low, nil
	case "normal":
		return Normal, nil
	case "high":
		return High, nil
	}
	return 0, fmt.Errorf("%w (got %q)", ErrBadPriority, s)
}

// Policy caps the priority each caller may ask for: a caller named in
// Callers gets at most its entry, else an operator at most Operator, else
// a peer at most Peer. A request without a priority is Normal, capped the
// same way (so a caller capped at low is always low). Zero fields take the
// defaults: Peer normal, Operator high. A Policy is read-only once in use
// and then safe for concurrent use.
type Policy struct {
	Peer     Priority
	Operator Priority
	// Callers caps callers by name, as the front authenticates them: a SPIFFE
	// ID, token:NAME for a static bearer token, "" for the anonymous caller
	// of the loopback development mode.
	Callers map[string]Priority
}

// DefaultPolicy is the policy of an empty --priority-caps.
const DefaultPolicy = "peer=normal,operator=high"

// Cap returns the highest priority caller may ask for.
func (p Policy) Cap(caller string, operator bool) Priority {
	if c, ok := p.Callers[caller]; ok && c != 0 {
		return c
	}
	if operator {
		if p.Operator != 0 {
			return p.Operator
		}
		return High
	}
	if p.Peer != 0 {
		return p.Peer
	}
	return Normal
}

// Effective returns the priority a run is queued at: asked (Normal when not
// given), lowered to the caller's cap.
func (p Policy) Effective(caller string, operator bool, asked Priority) Priority {
	if asked == 0 {
		asked = Normal
	}
	return min(asked, p.Cap(caller, operator))
}

// ParsePolicy reads a --priority-caps value: comma-separated NAME=PRIORITY
// pairs, where NAME is "peer" (every peer's cap), "operator" (every
// operator's), or a caller (spiffe://..., token:NAME, or "anonymous" for the
// loopback development mode's caller). Unnamed classes keep their defaults;
// the empty string is the default policy.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return Policy{}, fmt.Errorf("admit: priority cap %q: want NAME=low|normal|high", item)
		}
		prio, err := ParsePriority(val)
		if err != nil || prio == 0 {
			return Policy{}, fmt.Errorf("admit: priority cap %q: want NAME=low|normal|high", item)
		}
		switch name {
		case "peer":
			p.Peer = prio
		case "operator":
			p.Operator = prio
		default:
			if name == "anonymous" {
				name = ""
			} else if !strings.HasPrefix(name, "spiffe://") && !strings.HasPrefix(name, "token:") {
				return Policy{}, fmt.Errorf("admit: priority cap %q: a caller is peer, operator, anonymous, spiffe://... or token:NAME", item)
			}
			if p.Callers == nil {
				p.Callers = map[string]Priority{}
			}
			if _, dup := p.Callers[name]; dup {
				return Policy{}, fmt.Errorf("admit: priority cap for %q given twice", name)
			}
			p.Callers[name] = prio
		}
	}
	return p, nil
}

// String writes the policy as ParsePolicy reads it, classes first, callers
// sorted.
func (p Policy) String() string {
	parts := []string{"peer=" + p.Cap("\x00peer", false).String(), "operator=" + p.Cap("\x00op", true).String()}
	names := make([]string, 0, len(p.Callers))
	for n := range p.Callers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		shown := n
		if shown == "" {
			shown = "anonymous"
		}
		parts = append(parts, shown+"="+p.Callers[n].String())
	}
	return strings.Join(parts, ",")
}
