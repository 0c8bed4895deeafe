package a2abind

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

func TestReadInbound(t *testing.T) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "a"}, a2a.TextPart{Text: " "}, a2a.TextPart{Text: "b"})
	in, err := ReadInbound(m, map[string]any{api.MetaSkill: "research", api.MetaProvider: "peer:x", api.MetaHops: []any{"h1"}})
	if err != nil || in.Objective != "a\nb" || in.Skill != "research" || in.Provider != "peer:x" || in.Hops[0] != "h1" || in.Delegation != nil {
		t.Fatalf("%+v %v", in, err)
	}
	two := a2a.NewMessage(a2a.MessageRoleUser,
		a2a.DataPart{Data: map[string]any{api.DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "x"}}}},
		a2a.DataPart{Data: map[string]any{api.DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "y"}}}})
	if _, err := ReadInbound(two, nil); !errors.Is(err, errBadDelegation) {
		t.Fatalf("two delegations: %v", err)
	}
	unknownField := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{api.DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "x"}, "tools": true}}})
	if _, err := ReadInbound(unknownField, nil); !errors.Is(err, errBadDelegation) {
		t.Fatalf("unknown field: %v", err)
	}
	badSchema := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{api.DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "x", "output_format": map[string]any{"kind": "json", "schema": 5}}}}})
	if _, err := ReadInbound(badSchema, nil); !errors.Is(err, errBadDelegation) {
		t.Fatalf("bad schema: %v", err)
	}
	other := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "t"}, a2a.DataPart{Data: map[string]any{"unrelated": 1}})
	if in, err := ReadInbound(other, nil); err != nil || in.Delegation != nil || in.Objective != "t" {
		t.Fatalf("an unrelated data part: %+v %v", in, err)
	}
}

// FuzzReadInbound reads arbitrary messages: never a panic, and an accepted
// one has sane mesh values.
func FuzzReadInbound(f *testing.F) {
	payload := api.SpawnPayload{Contract: api.OutputContract{Objective: "o"}, Limits: testGrant}
	b, _ := json.Marshal(Outbound(payload, nil, []string{"a"}, 1, 4))
	f.Add(b)
	for _, s := range []string{
		`{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"agentd/depth":2,"agentd/hops":["x","y"]}}`,
		`{"messageId":"m","role":"user","parts":[{"kind":"data","data":{"agentd/delegation":{"contract":{"objective":"x","output_format":{"kind":"json","schema":true}},"scope":{"allow":[{"server":"s","tool":"t"}]}}}}]}`,
		`{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"agentd/budget":{"max_tokens":1e30}}}`,
		`{"messageId":"m","role":"user","parts":[],"metadata":{"agentd/depth":1.5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m a2a.Message
		if json.Unmarshal(b, &m) != nil {
			return
		}
		in, err := ReadInbound(&m, nil)
		if err != nil {
			return
		}
		if in.Depth < 0 || in.MaxDepth < 0 || len(in.Hops) > 64 {
			t.Fatalf("accepted %+v", in)
		}
		if d := in.Delegation; d != nil && (d.Limits.MaxSteps < 0 || d.Limits.MaxTokens < 0 || d.Limits.Deadline < 0) {
			t.Fatalf("accepted negative limits %+v", d.Limits)
		}
	})
}
