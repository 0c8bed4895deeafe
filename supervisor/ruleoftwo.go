package supervisor

import (
	"errors"

	"github.com/agentd/agentd/api"
)

// ToolTagger returns the Rule-of-Two legs of one tool. ok is false for a tool
// nobody tagged, which counts as untrusted_input (Untagged).
type ToolTagger func(ref api.ToolRef) (tags api.ToolTags, ok bool)

// Untagged is what an untagged tool counts as: a source of untrusted input.
var Untagged = api.ToolTags{UntrustedInput: true}

// ScopeTags returns the legs a grant holds: the union of the legs of every tool
// in allow, an untagged tool (or a nil tagger) counting as Untagged, and
// api.ExecRef always counting as api.ExecTags (sensitive and egress), whatever
// the tagger says. It is a pure function.
func ScopeTags(allow []api.ToolRef, tagger ToolTagger) api.ToolTags {
	var u api.ToolTags
	for _, ref := range allow {
		if ref == api.ExecRef {
			u = unionTags(u, api.ExecTags)
			continue
		}
		t, ok := api.ToolTags{}, false
		if tagger != nil {
			t, ok = tagger(ref)
		}
		if !ok {
			t = Untagged
		}
		u = unionTags(u, t)
	}
	return u
}

func unionTags(a, b api.ToolTags) api.ToolTags {
	return api.ToolTags{
		UntrustedInput: a.UntrustedInput || b.UntrustedInput,
		Sensitive:      a.Sensitive || b.Sensitive,
		Egress:         a.Egress || b.Egress,
	}
}

func intersectTags(a, b api.ToolTags) api.ToolTags {
	return api.ToolTags{
		UntrustedInput: a.UntrustedInput && b.UntrustedInput,
		Sensitive:      a.Sensitive && b.Sensitive,
		Egress:         a.Egress && b.Egress,
	}
}

// ErrTrifecta refuses a grant that holds all three Rule-of-Two legs at once.
var ErrTrifecta = errors.New("supervisor: the grant holds all three Rule-of-Two legs (untrusted_input, sensitive, egress)")

// CheckRootGrant is the startup Rule-of-Two gate over the root grant's legs: a
// grant holding the trifecta is refused with ErrTrifecta unless the operator
// allowed it. The override is the operator's, for the root only: the chokepoint
// refuses a spawn whose scope would hand one child all three legs regardless.
func CheckRootGrant(grant api.ToolTags, allowTrifecta bool) error {
	if grant.Trifecta() && !allowTrifecta {
		return ErrTrifecta
	}
	return nil
}
