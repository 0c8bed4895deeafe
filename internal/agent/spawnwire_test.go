package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// fill sets every exported field reachable from v to a value that is not
// its zero (strings, numbers, booleans, one element in each slice and map,
// a value behind each pointer), down to depth levels of structs: a field
// added to the payload is then in the payload decodeSpawn is tested on.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		if depth > 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), depth)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"k":[1,"v"]}`))
			return
		}
		if depth > 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fill(v.Index(0), depth-1)
		}
	case reflect.Map:
		if depth > 0 {
			m := reflect.MakeMap(v.Type())
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, depth-1)
			fill(e, depth-1)
			m.SetMapIndex(k, e)
			v.Set(m)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)))
			return
		}
		if depth == 0 {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth-1)
			}
		}
	}
}

// decodeSpawn decodes every payload as json.Unmarshal decodes it into an
// api.SpawnPayload: one with every field set, each rare part absent, null
// or present, and bad ones (a rare part of the wrong type fails as it
// fails json.Unmarshal).
func TestDecodeSpawnIsUnmarshal(t *testing.T) {
	var full api.SpawnPayload
	fill(reflect.ValueOf(&full).Elem(), 4)
	if full.Resume == nil || full.Agent == nil || len(full.Intelligence.Fallbacks) == 0 || len(full.Intelligence.Breakers) == 0 || full.Intelligence.Breaker.Failures == 0 {
		t.Fatalf("the filled payload lacks a rare part: %+v", full)
	}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	cases := []string{string(b), rehearsalParams}
	for _, rare := range []string{`"agent":`, `"resume":`, `"fallbacks":`, `"breaker":`, `"breakers":`} {
		// The rare part null, and of the wrong type.
		i := strings.Index(string(b), rare)
		if i < 0 {
			t.Fatalf("%s is not in %s", rare, b)
		}
		var v json.RawMessage
		dec := json.NewDecoder(strings.NewReader(string(b[i+len(rare):])))
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		rest := string(b[i+len(rare)+int(dec.InputOffset()):])
		cases = append(cases, string(b[:i+len(rare)])+"null"+rest, string(b[:i+len(rare)])+`"wrong"`+rest)
	}
	cases = append(cases, `{"agent":null,"resume":null,"intelligence":{"endpoint":"e","fallbacks":null}}`, `{}`, `[]`, `{"depth":"deep"}`,
		`{"AGENT":{"type":"t"},"Intelligence":{"Breakers":[{"state":"open"}]}}`)
	for _, c := range cases {
		var got, want api.SpawnPayload
		gotErr, wantErr := decodeSpawn([]byte(c), &got), json.Unmarshal([]byte(c), &want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%s: decodeSpawn %v, json.Unmarshal %v", c, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\ndecodeSpawn  %+v\njson.Unmarshal %+v", c, got, want)
		}
	}
}

// FuzzDecodeSpawn: any params decode by decodeSpawn as by json.Unmarshal,
// or fail as it fails.
func FuzzDecodeSpawn(f *testing.F) {
	var full api.SpawnPayload
	fill(reflect.ValueOf(&full).Elem(), 3)
	b, _ := json.Marshal(full)
	for _, s := range []string{string(b), `{"agent":null}`, `{"intelligence":{"breaker":{"failures":2},"fallbacks":[{"endpoint":"x"}]}}`,
		`{"resume":{"answer":"a"}}`, `{"resume":"x"}`, `{"agent":{}}`, `null`,
		// A key twice: decoded twice into the same field, as json does.
		`{"Agent":[],"Agent":{}}`, `{"agent":{"type":"a"},"agent":{"peers":["x"]}}`, `{"agent":{"type":"a"},"AGENT":null}`,
		`{"intelligence":{"fallbacks":[{"endpoint":"a"},{"endpoint":"b"}]},"intelligence":{"fallbacks":[{"model":"m"}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		var got, want api.SpawnPayload
		gotErr, wantErr := decodeSpawn(params, &got), json.Unmarshal(params, &want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%s: decodeSpawn %v, json.Unmarshal %v", params, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\ndecodeSpawn  %+v\njson.Unmarshal %+v", params, got, want)
		}
	})
}

// envTestAllocs makes the test binary a process that runs one of
// allocsProbes once and prints what the heap allocated over it.
const envTestAllocs = "AGENT_TEST_ALLOCS"

// allocsProbes are what a fresh process measures (freshAllocs).
var allocsProbes = map[string]func() error{
	"unmarshal": func() error {
		var p api.SpawnPayload
		return json.Unmarshal([]byte(rehearsalParams), &p)
	},
	"decodeSpawn": func() error {
		var p api.SpawnPayload
		return decodeSpawn([]byte(rehearsalParams), &p)
	},
}

// rehearsalParams is rehearsalSpawn's params (TestDecodeSpawnBuildsOnlyWhatItDecodes
// checks the cut).
var rehearsalParams = strings.TrimSuffix(strings.TrimPrefix(rehearsalSpawn, `{"jsonrpc":"2.0","method":"spawn","params":`), "}")

// printAllocs is the process envTestAllocs starts: it runs the probe named
// and prints the bytes the heap allocated over it (runtime.MemStats'
// TotalAlloc, exact: ReadMemStats flushes every cache's counts first).
func printAllocs(name string) int {
	probe, ok := allocsProbes[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no probe %q\n", name)
		return 2
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := probe()
	runtime.ReadMemStats(&after)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(after.TotalAlloc - before.TotalAlloc)
	return 0
}

// freshAllocs is what the heap allocated over one run of the probe named,
// in a process of its own (the test binary started again), so that no
// other test built encoding/json's caches in it first.
func freshAllocs(t *testing.T, name string) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envTestAllocs+"="+name)
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v; stderr:\n%s", name, err, stderr.String())
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("%s printed %q", name, out)
	}
	return n
}

// A child decoding a payload without the rare parts builds no decoder for
// them: a fresh process decoding the rehearsal's payload allocated 70 KiB
// into an api.SpawnPayload and 49 KiB through decodeSpawn (the encoders
// of the agent, resume and breaker types and of the fallbacks' copy of
// the intelligence, kept in encoding/json's cache for the child's life).
func TestDecodeSpawnBuildsOnlyWhatItDecodes(t *testing.T) {
	if f, err := api.DecodeFrameBody([]byte(rehearsalSpawn)); err != nil || string(f.Params) != rehearsalParams {
		t.Fatalf("rehearsalParams %s: %v", rehearsalParams, err)
	}
	whole, wire := freshAllocs(t, "unmarshal"), freshAllocs(t, "decodeSpawn")
	t.Logf("json.Unmarshal %d bytes, decodeSpawn %d", whole, wire)
	if wire+12<<10 > whole {
		t.Fatalf("decodeSpawn allocated %d bytes, json.Unmarshal %d: want at least 12 KiB less", wire, whole)
	}
}
