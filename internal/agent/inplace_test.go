package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/agentd/agentd/api"
)

// heapAllocs is the bytes the heap has allocated so far. The runtime
// counts a small object's bytes by its span, so a bound on a difference of
// two readings is loose by up to a span (32 KiB).
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// allocated is the fewest bytes the heap allocated over one call of f, of
// five, each after a call of setup: the count is the process's, and
// another test's goroutine may allocate during one call, not during all.
func allocated(setup, f func()) uint64 {
	heapAllocs() // the first read builds the runtime's table of metrics
	least := ^uint64(0)
	for range 5 {
		setup()
		before := heapAllocs()
		f()
		least = min(least, heapAllocs()-before)
	}
	return least
}

// unquoteInPlace decodes a string literal as encoding/json does: escapes,
// surrogate pairs, lone surrogates (U+FFFD).
func FuzzUnquoteInPlace(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\t\"c\"\\ \/"`, `"\u00e9\u2028x"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`,
		`"\udc00\ud800\udc00"`, `"é ü \b\f\r"`, `"\ud83d"`, `"x\ud83d\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' || !json.Valid(lit) || !utf8.Valid(lit) {
			return
		}
		var want string
		if err := json.Unmarshal(lit, &want); err != nil {
			return
		}
		b := append([]byte(nil), lit[1:len(lit)-1]...)
		if got := string(b[:unquoteInPlace(b)]); got != want {
			t.Fatalf("%s: %q, want %q", lit, got, want)
		}
	})
}

// A lifted string is the literal's value, in the buffer's memory, and the
// rest of the text decodes to what the whole did, with "" in its place.
func TestLiftString(t *testing.T) {
	big := strings.Repeat("ab\"c\n\u00e9\U0001F600 ", 2000)
	for _, doc := range []string{
		`{"a":1,"s":` + quote(big) + `,"z":[true,"x"]}`,
		`{"s":` + quote(big) + `}`,
		`{"s":"short","t":` + quote(big) + `}`,
	} {
		var want map[string]any
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		buf := []byte(doc)
		var at struct {
			S span `json:"s"`
			T span `json:"t"`
		}
		if err := json.Unmarshal(buf, &at); err != nil {
			t.Fatal(err)
		}
		key, lit := "s", at.S
		if len(at.T) > 0 {
			key, lit = "t", at.T
		}
		rest, s, ok := liftString(buf, lit)
		if !ok {
			t.Fatalf("%.40s: not lifted", doc)
		}
		var got map[string]any
		if err := json.Unmarshal(rest, &got); err != nil {
			t.Fatalf("the rest %q: %v", rest, err)
		}
		if got[key] != "" {
			t.Errorf("the rest holds %q at %s", got[key], key)
		}
		got[key] = s
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.40s: decoded differently", doc)
		}
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p < uintptr(unsafe.Pointer(&buf[0])) || p >= uintptr(unsafe.Pointer(&buf[0]))+uintptr(len(buf)) {
			t.Error("the lifted string is not in the buffer")
		}
	}
	// Invalid UTF-8 (which encoding/json replaces, growing the string) and
	// a literal that is not the buffer's are left alone.
	buf := []byte("{\"s\":\"a\xffb\"}")
	if _, _, ok := liftString(buf, buf[5:11]); ok {
		t.Error("invalid UTF-8 lifted")
	}
	if _, _, ok := liftString(buf, []byte(`"ab"`)); ok {
		t.Error("a literal from elsewhere lifted")
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// spawnFrameBody is the body of the spawn frame for p (its length prefix
// cut), as the supervisor writes it.
func spawnFrameBody(t *testing.T, p *api.SpawnPayload) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := api.NewFrameWriter(&buf, 0).Send(api.MethodSpawn, 0, p); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 4 {
		t.Fatalf("a frame of %d bytes", buf.Len())
	}
	return buf.Bytes()[4:]
}

// spawnFrameParams is the params of a spawn frame for p, as the supervisor
// writes it.
func spawnFrameParams(t *testing.T, p *api.SpawnPayload) []byte {
	t.Helper()
	body := spawnFrameBody(t, p)
	f, err := api.DecodeFrameBody(body)
	if err != nil {
		t.Fatal(err)
	}
	return f.Params
}

// The spawn frame's objective is decoded into the frame's own body: the
// child allocated the body (74 KB for figure 9's 64 KiB objective) and then
// a copy of the objective, and kept both while it waited (it does not
// collect then). The payload decodes as api.DecodeParams decodes it.
func TestSpawnObjectiveDecodedIntoItsFrame(t *testing.T) {
	p := payload()
	p.Seed.Slices = []api.SeedSlice{{Label: "text", Content: api.SeedContent{Text: "alpha beta gamma"}}}
	p.Contract.Objective = strings.Repeat("the earlier turns, \"quoted\" and\nsplit ", 64<<10/38)
	p.Tools = []api.ToolSpec{{Name: "fs/read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	var want api.SpawnPayload
	if err := api.DecodeParams(&api.Frame{Method: api.MethodSpawn, Params: spawnFrameParams(t, p)}, &want); err != nil {
		t.Fatal(err)
	}
	var params []byte
	var got api.SpawnPayload
	var err error
	n := allocated(func() { params, got = spawnFrameParams(t, p), api.SpawnPayload{} }, func() { err = decodeSpawnParams(params, &got) })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	if n > uint64(len(p.Contract.Objective)/2) {
		t.Errorf("decoding a %d-byte spawn frame allocated %d bytes: the %d-byte objective was copied", len(params), n, len(p.Contract.Objective))
	}
	if d := uintptr(unsafe.Pointer(unsafe.StringData(got.Contract.Objective))) - uintptr(unsafe.Pointer(&params[0])); d >= uintptr(len(params)) {
		t.Error("the objective is not in the frame's memory")
	}
	// A small payload, and one whose objective is not most of it, decode
	// as before.
	for _, obj := range []string{"small", strings.Repeat("x", 9<<10)} {
		p.Contract.Objective = obj
		p.Contract.ToolGuidance = strings.Repeat("g", 10<<10)
		var got, want api.SpawnPayload
		if err := decodeSpawnParams(spawnFrameParams(t, p), &got); err != nil {
			t.Fatal(err)
		}
		api.DecodeParams(&api.Frame{Method: api.MethodSpawn, Params: spawnFrameParams(t, p)}, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v\nwant %+v", got, want)
		}
	}
	// Bad params fail as api.DecodeParams fails.
	bad := []byte(`{"contract":{"objective":"` + strings.Repeat("o", 10<<10) + `"},"depth":"deep"}`)
	if err := decodeSpawnParams(bad, &got); err == nil || !strings.Contains(err.Error(), "spawn params") {
		t.Fatalf("bad params: %v", err)
	}
}
