package agent

import (
	"encoding/json"

	"github.com/agentd/agentd/api"
)

// encoding/json, the first time it decodes into a struct type, builds that
// type's fields and an encoder for every field's type, and so for every
// type reachable from it, whether the input holds them or not; it keeps
// them in its cache for the process's life. Decoding api.SpawnPayload
// built them for the whole payload's graph: 70 KiB allocated, most of a
// rehearsal's (figure 9). A child decodes its payload once, and most
// payloads carry no declared agent, no resumed conversation and no
// fallback model or breaker state: spawnWire leaves those as slices of the
// input and decodes each only when it is there, and a child without them
// allocates 50 KiB (in a model call it is 16 to 20 KiB smaller).
//
// The wire types embed the api types and shadow the rare fields with
// fields of the same JSON names: encoding/json takes the outer field and
// drops the embedded one with its type, so every other field decodes as
// it did, by the api types' own declarations.

// spawnWire is api.SpawnPayload as a child decodes it.
type spawnWire struct {
	api.SpawnPayload
	Intelligence intelligenceWire `json:"intelligence"`
	Agent        occurrences      `json:"agent,omitempty"`
	Resume       occurrences      `json:"resume,omitempty"`
}

// intelligenceWire is api.Intelligence as a child decodes it.
type intelligenceWire struct {
	api.Intelligence
	Fallbacks occurrences `json:"fallbacks,omitempty"`
	Breaker   occurrences `json:"breaker,omitempty"`
	Breakers  occurrences `json:"breakers,omitempty"`
}

// occurrences are a field's values as they are in the decoder's input, in
// order: a key that comes more than once is decoded once per occurrence,
// into the same field, as encoding/json decodes it (an object merged into
// the last, null clearing a pointer), and fails as it fails.
type occurrences [][]byte

// UnmarshalJSON keeps b, a slice of the input (not a copy: a resumed
// conversation can be megabytes).
func (o *occurrences) UnmarshalJSON(b []byte) error {
	*o = append(*o, b)
	return nil
}

// decodeSpawn decodes a spawn payload's JSON into p, as json.Unmarshal
// does, building encoding/json's caches only for the parts data holds.
func decodeSpawn(data []byte, p *api.SpawnPayload) error {
	var w spawnWire
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*p = w.SpawnPayload
	p.Intelligence = w.Intelligence.Intelligence
	var first error
	for _, rare := range []struct {
		values occurrences
		v      any
	}{
		{w.Agent, &p.Agent}, {w.Resume, &p.Resume},
		{w.Intelligence.Fallbacks, &p.Intelligence.Fallbacks},
		{w.Intelligence.Breaker, &p.Intelligence.Breaker},
		{w.Intelligence.Breakers, &p.Intelligence.Breakers},
	} {
		for _, b := range rare.values {
			// As json.Unmarshal, the first error is returned once
			// everything else is decoded.
			if err := json.Unmarshal(b, rare.v); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
