package agent

import (
	"crypto/sha256"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decodedKey is callKey as it was: the arguments decoded by encoding/json
// into an any, then written in canon's form. callKey must give the same
// digest without decoding.
func decodedKey(wire string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(wire))
	var v any
	if json.Unmarshal(args, &v) != nil {
		h.Write([]byte{0, 'r'})
		h.Write(args)
	} else {
		h.Write([]byte{0, 'v'})
		writeDecoded(h, v)
	}
	return string(h.Sum(nil))
}

func writeDecoded(w io.Writer, v any) {
	switch v := v.(type) {
	case nil:
		w.Write([]byte{'n'})
	case bool:
		if v {
			w.Write([]byte{'t'})
		} else {
			w.Write([]byte{'f'})
		}
	case float64:
		w.Write(strconv.AppendFloat([]byte{'d'}, v, 'g', -1, 64))
		w.Write([]byte{';'})
	case string:
		io.WriteString(w, "s"+strconv.Itoa(len(v))+":"+v)
	case []any:
		io.WriteString(w, "a"+strconv.Itoa(len(v))+":")
		for _, e := range v {
			writeDecoded(w, e)
		}
	case map[string]any:
		io.WriteString(w, "o"+strconv.Itoa(len(v))+":")
		for _, k := range slices.Sorted(maps.Keys(v)) {
			writeDecoded(w, k)
			writeDecoded(w, v[k])
		}
	}
}

// callKey hashes the arguments as encoding/json decodes them: escapes,
// invalid UTF-8, repeated keys, numbers written differently, numbers out of
// range, invalid JSON.
func FuzzCallKey(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,null,"x"]}`, ` { "b" : [ true , null , "x" ] , "a" : 1.0 } `,
		`{"a":1,"a":2}`, `{"\u0061":"\n\ud83d\ude00\ud800"}`, "{\"k\xff\":\"v\xfe\"}", `[1e400]`, `[-0, 0, 1E2, 100]`,
		`not json`, `"x"`, `[[1],2]`, `{"o":{"y":2,"x":1},"a":[{}, []]}`, `{"handle":"` + strings.Repeat("h", 600) + `"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if got, want := callKey("t", json.RawMessage(args)), decodedKey("t", json.RawMessage(args)); got != want {
			t.Fatalf("%q: the digest differs from the decoded value's", args)
		}
	})
}

// The repeat check's key allocates next to nothing for a call's arguments:
// decoded, figure 9's 16 KiB handle was a string of 16 KiB and hashing it
// copied it again (33 KB a call, kept by a waiting child).
func TestCallKeyDoesNotCopyTheArguments(t *testing.T) {
	big := json.RawMessage(`{"handle":"` + strings.Repeat("handle with a \\\"quote\\\" ", 16<<10/24) + `","n":[1,2,{"b":"x","a":null}]}`)
	if n := allocated(func() {}, func() { callKey("subagent.status", big) }); n > uint64(len(big)/4) {
		t.Fatalf("the key of a %d-byte call allocated %d bytes", len(big), n)
	}
}
