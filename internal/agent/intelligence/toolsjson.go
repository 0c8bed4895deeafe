package intelligence

import (
	"bytes"
	"slices"
)

// toolsCache keeps the tools a model was last offered, encoded as its
// dialect sends them, for the next calls that offer the same tools: a
// loop offers the same ones at every step. Encoding them for each call
// (json.Marshal of the tools, the schemas decoded to check them) made
// about 85 KiB of garbage a call with the self-tools alone, which a child
// waiting on its answer keeps; now a model encodes them once, into a
// slice of their length, and each call's body refers to it. The specs
// are compared by value; their Parameters must not change in place while
// the model is used.
type toolsCache struct {
	specs []ToolSpec
	enc   []byte // nil: no tools
}

// encoded is specs encoded by encode, from the cache when they are the
// ones encoded last; nil for no tools.
func (c *toolsCache) encoded(specs []ToolSpec, encode func([]ToolSpec) ([]byte, error)) ([]byte, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	if c.enc != nil && sameTools(c.specs, specs) {
		return c.enc, nil
	}
	enc, err := encode(specs)
	if err != nil {
		return nil, err
	}
	c.specs, c.enc = slices.Clone(specs), enc
	return enc, nil
}

// sameTools says whether a and b offer the same tools, in the same order.
func sameTools(a, b []ToolSpec) bool {
	return slices.EqualFunc(a, b, func(x, y ToolSpec) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Parameters, y.Parameters)
	})
}
