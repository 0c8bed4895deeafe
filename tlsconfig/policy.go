package tlsconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// Role is what an authenticated caller may do.
type Role int

// Roles, from least to most. An operator may also do everything a peer may.
const (
	RoleNone     Role = iota // authenticated but not allowed
	RolePeer                 // may send A2A work
	RoleOperator             // may also call the a2a.* operator methods
)

func (r Role) String() string {
	switch r {
	case RolePeer:
		return "peer"
	case RoleOperator:
		return "operator"
	}
	return "none"
}

// ParseRole parses "peer" or "operator".
func ParseRole(s string) (Role, error) {
	switch s {
	case "peer":
		return RolePeer, nil
	case "operator":
		return RoleOperator, nil
	}
	return RoleNone, fmt.Errorf("role %q: want peer or operator", s)
}

// Policy maps verified SPIFFE IDs to roles: operators by their exact ID, peers
// by exact ID or by trust domain. An ID in none of the lists has RoleNone. The
// zero value allows nobody. A Policy is read-only after it is built and safe
// for concurrent use.
type Policy struct {
	Peers        []spiffeid.ID
	TrustDomains []spiffeid.TrustDomain
	Operators    []spiffeid.ID
}

// Role returns id's role.
func (p *Policy) Role(id spiffeid.ID) Role {
	if slices.Contains(p.Operators, id) {
		return RoleOperator
	}
	if slices.Contains(p.Peers, id) || slices.Contains(p.TrustDomains, id.TrustDomain()) {
		return RolePeer
	}
	return RoleNone
}

// Empty reports whether the policy allows nobody.
func (p *Policy) Empty() bool {
	return len(p.Peers) == 0 && len(p.TrustDomains) == 0 && len(p.Operators) == 0
}

// ParsePolicy builds a policy from flag values; an error names the bad value.
// Each list entry may itself be comma-separated.
func ParsePolicy(peers, trustDomains, operators []string) (Policy, error) {
	var p Policy
	for _, s := range splitAll(peers) {
		id, err := spiffeid.FromString(s)
		if err != nil {
			return Policy{}, fmt.Errorf("peer %q: %w", s, err)
		}
		p.Peers = append(p.Peers, id)
	}
	for _, s := range splitAll(trustDomains) {
		td, err := spiffeid.TrustDomainFromString(s)
		if err != nil {
			return Policy{}, fmt.Errorf("trust domain %q: %w", s, err)
		}
		p.TrustDomains = append(p.TrustDomains, td)
	}
	for _, s := range splitAll(operators) {
		id, err := spiffeid.FromString(s)
		if err != nil {
			return Policy{}, fmt.Errorf("operator %q: %w", s, err)
		}
		p.Operators = append(p.Operators, id)
	}
	return p, nil
}

func splitAll(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
