package a2abind

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// ContractExtensionURI names the agentd contract extension. A peer whose agent
// card declares it honours output schemas, depth limits and tool filters, and
// reads the structured delegation (api.DataKeyDelegation) and the mesh metadata
// (api.MetaDepth, api.MetaMaxDepth, api.MetaHops, api.MetaBudget) agentd sends.
const ContractExtensionURI = "https://github.com/agentd/agentd/a2a/extensions/contract/v1"

// MetaTrace is the message metadata key of the W3C trace context. The agentd/
// keys of a delegation (api.MetaDepth, api.MetaMaxDepth, api.MetaHops,
// api.MetaBudget), the routing hints (api.MetaProvider, api.MetaSkill) and
// the data part's key (api.DataKeyDelegation) are api's.
const MetaTrace = "traceparent"

// Delegation is the structured contract one agentd hands another: everything
// of the spawn payload a caller may choose. The receiver mints identity,
// clamps the limits to its own grant and narrows the scope to the tools it
// holds.
type Delegation struct {
	Contract api.OutputContract `json:"contract"`
	Seed     api.ContextSeed    `json:"seed"`
	// Scope restricts the remote child's tools (a tool filter); nil leaves the
	// receiver's own grant.
	Scope     *api.ToolScope `json:"scope,omitempty"`
	Limits    api.Limits     `json:"limits"`
	Telemetry api.Telemetry  `json:"telemetry"`
}

// Budget is the budget summary in api.MetaBudget, readable by any A2A peer.
type Budget struct {
	MaxTokens  int64 `json:"max_tokens"`
	MaxSteps   int   `json:"max_steps"`
	DeadlineMS int64 `json:"deadline_ms"`
}

// Inbound is what an incoming message asks for.
type Inbound struct {
	Objective  string
	Delegation *Delegation // nil for a plain A2A message
	Hops       []string
	Depth      int
	MaxDepth   int // 0: not given
	Budget     *Budget
	Provider   string
	Skill      string
	Trace      string
}

// errBadDelegation wraps every refusal of ReadInbound.
var errBadDelegation = errors.New("bad delegation")

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadDelegation}, args...)...)
}

// ReadInbound reads an incoming message: the objective from its text parts
// (or the delegation's contract), the structured delegation from its data
// part, and the mesh metadata from the message metadata, falling back to the
// request metadata. Anything malformed is an error naming the field.
func ReadInbound(m *a2a.Message, reqMeta map[string]any) (Inbound, error) {
	var in Inbound
	var texts []string
	for _, p := range m.Parts {
		switch v := p.(type) {
		case a2a.TextPart:
			if strings.TrimSpace(v.Text) != "" {
				texts = append(texts, v.Text)
			}
		case a2a.DataPart:
			raw, ok := v.Data[api.DataKeyDelegation]
			if !ok {
				continue
			}
			if in.Delegation != nil {
				return Inbound{}, badf("more than one %s data part", api.DataKeyDelegation)
			}
			d, err := decodeDelegation(raw)
			if err != nil {
				return Inbound{}, err
			}
			in.Delegation = d
		}
	}
	in.Objective = strings.Join(texts, "\n")
	if in.Delegation != nil && strings.TrimSpace(in.Delegation.Contract.Objective) != "" {
		in.Objective = in.Delegation.Contract.Objective
	}
	meta := func(key string) (any, bool) {
		if v, ok := m.Metadata[key]; ok {
			return v, true
		}
		v, ok := reqMeta[key]
		return v, ok
	}
	var err error
	if v, ok := meta(api.MetaHops); ok {
		if in.Hops, err = stringList(v); err != nil {
			return Inbound{}, badf("metadata %s: %v", api.MetaHops, err)
		}
	}
	if v, ok := meta(api.MetaDepth); ok {
		if in.Depth, err = smallInt(v); err != nil {
			return Inbound{}, badf("metadata %s: %v", api.MetaDepth, err)
		}
	}
	if v, ok := meta(api.MetaMaxDepth); ok {
		if in.MaxDepth, err = smallInt(v); err != nil {
			return Inbound{}, badf("metadata %s: %v", api.MetaMaxDepth, err)
		}
	}
	if v, ok := meta(api.MetaBudget); ok {
		var b Budget
		if err := remarshal(v, &b); err != nil || b.MaxTokens < 0 || b.MaxSteps < 0 || b.DeadlineMS < 0 {
			return Inbound{}, badf("metadata %s: want {max_tokens, max_steps, deadline_ms}, none negative", api.MetaBudget)
		}
		in.Budget = &b
	}
	for key, dst := range map[string]*string{api.MetaProvider: &in.Provider, api.MetaSkill: &in.Skill, MetaTrace: &in.Trace} {
		if v, ok := meta(key); ok {
			s, ok := v.(string)
			if !ok {
				return Inbound{}, badf("metadata %s: want a string", key)
			}
			*dst = s
		}
	}
	return in, nil
}

func decodeDelegation(raw any) (*Delegation, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, badf("%s: %v", api.DataKeyDelegation, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var d Delegation
	if err := dec.Decode(&d); err != nil {
		return nil, badf("%s: %v", api.DataKeyDelegation, err)
	}
	if err := d.Contract.OutputFormat.Validate(); err != nil {
		return nil, badf("%s.contract: %v", api.DataKeyDelegation, err)
	}
	if err := d.Seed.Validate(); err != nil {
		return nil, badf("%s: %v", api.DataKeyDelegation, err)
	}
	if d.Scope != nil {
		if err := d.Scope.Validate(); err != nil {
			return nil, badf("%s: %v", api.DataKeyDelegation, err)
		}
	}
	l := d.Limits
	if l.MaxSteps < 0 || l.MaxTokens < 0 || l.Deadline < 0 || l.MaxChildren < 0 {
		return nil, badf("%s.limits: no limit may be negative", api.DataKeyDelegation)
	}
	return &d, nil
}

func remarshal(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		if ss, ok := v.([]string); ok {
			return ss, nil
		}
		return nil, errors.New("want a list of strings")
	}
	if len(list) > 64 {
		return nil, errors.New("more than 64 hops")
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok || s == "" {
			return nil, errors.New("want a list of non-empty strings")
		}
		out = append(out, s)
	}
	return out, nil
}

func smallInt(v any) (int, error) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, err
		}
		f = x
	default:
		return 0, errors.New("want a number")
	}
	if f < 0 || f > 1024 || f != math.Trunc(f) {
		return 0, errors.New("want an integer in 0..1024")
	}
	return int(f), nil
}

// Outbound builds the message that delegates payload to a peer: a text part
// with the objective, a data part with the structured delegation, and the mesh
// metadata (depth, max depth, hops, budget, trace context). scope is the tool
// filter to send; nil sends none.
func Outbound(payload api.SpawnPayload, scope *api.ToolScope, hops []string, depth, maxDepth int) *a2a.Message {
	d := Delegation{
		Contract: payload.Contract,
		Seed:     payload.Seed,
		Scope:    scope,
		Limits:   payload.Limits,
		Telemetry: api.Telemetry{
			TraceID:      payload.Telemetry.TraceID,
			ParentSpanID: payload.Telemetry.ParentSpanID,
			Traceparent:  payload.Telemetry.Traceparent,
			LogLevel:     payload.Telemetry.LogLevel,
		},
	}
	var data map[string]any
	_ = remarshal(map[string]any{api.DataKeyDelegation: d}, &data)
	msg := a2a.NewMessage(a2a.MessageRoleUser,
		a2a.TextPart{Text: payload.Contract.Objective},
		a2a.DataPart{Data: data},
	)
	hopList := make([]any, len(hops))
	for i, h := range hops {
		hopList[i] = h
	}
	msg.Metadata = map[string]any{
		api.MetaDepth: depth,
		api.MetaHops:  hopList,
		api.MetaBudget: map[string]any{
			"max_tokens":  payload.Limits.MaxTokens,
			"max_steps":   payload.Limits.MaxSteps,
			"deadline_ms": payload.Limits.Deadline.D().Milliseconds(),
		},
	}
	if maxDepth > 0 {
		msg.Metadata[api.MetaMaxDepth] = maxDepth
	}
	if payload.Telemetry.Traceparent != "" {
		msg.Metadata[MetaTrace] = payload.Telemetry.Traceparent
	}
	msg.Extensions = []string{ContractExtensionURI}
	return msg
}
