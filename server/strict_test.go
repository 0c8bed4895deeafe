package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
)

// strictHandler is the front with one operator method, a2a.Tree, that
// counts its calls and decodes {"depth": N} strictly, served to the holder of
// operatorToken.
func strictHandler(t *testing.T) (*atomic.Int32, func(body string) rpcReply) {
	t.Helper()
	tokens, err := ParseTokens([]byte(operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	var trees atomic.Int32
	tree := func(_ context.Context, raw json.RawMessage) (any, error) {
		var p struct {
			Depth int `json:"depth"`
		}
		if err := decodeOptional(raw, &p); err != nil {
			return nil, err
		}
		trees.Add(1)
		return map[string]any{"tree": true}, nil
	}
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	h := Handler(Config{
		Handler: engine,
		Card:    a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}),
		Methods: map[string]Method{"a2a.Tree": tree},
		Auth:    &Auth{Tokens: tokens},
	})
	return &trees, func(body string) rpcReply {
		t.Helper()
		var r rpcReply
		if err := json.Unmarshal(newRecorderRequest(h, body, operatorToken), &r); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r
	}
}

// A name given twice, or spelled in another case than a member or field it
// would set, is refused and nothing runs: encoding/json alone would run the
// last one given, matching names case-insensitively (a2a.Tree here).
func TestStrictNames(t *testing.T) {
	trees, call := strictHandler(t)
	send := func(message string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":` + message + `}}`
	}
	for _, tc := range []struct {
		name, body string
		code       int
		says       string
	}{
		{"case variant of method", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","Method":"a2a.Tree","params":{"id":"x"}}`, CodeInvalidRequest, `"Method" is not "method"`},
		{"case variant alone", `{"jsonrpc":"2.0","id":1,"METHOD":"a2a.Tree"}`, CodeInvalidRequest, `"METHOD" is not "method"`},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","method":"a2a.Tree"}`, CodeInvalidRequest, `"method" given twice`},
		{"method twice, escaped", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","\u006dethod":"a2a.Tree"}`, CodeInvalidRequest, `"method" given twice`},
		{"id in capitals", `{"jsonrpc":"2.0","ID":1,"method":"a2a.Tree"}`, CodeInvalidRequest, `"ID" is not "id"`},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"a2a.Tree","params":{},"params":{"depth":1}}`, CodeInvalidRequest, `"params" given twice`},
		{"operator param twice", `{"jsonrpc":"2.0","id":1,"method":"a2a.Tree","params":{"depth":1,"depth":2}}`, CodeInvalidParams, "params.depth: given twice"},
		{"operator param in capitals", `{"jsonrpc":"2.0","id":1,"method":"a2a.Tree","params":{"Depth":1}}`, CodeInvalidParams, `"Depth" is not "depth"`},
		{"task id twice", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a","id":"b"}}`, CodeInvalidParams, "params.id: given twice"},
		{"task id in capitals", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"ID":"a"}}`, CodeInvalidParams, `"ID" is not "id"`},
		{"messageId in another case", send(`{"messageID":"m","role":"user","parts":[{"kind":"text","text":"x"}]}`), CodeInvalidParams, `params.message: member "messageID" is not "messageId"`},
		{"part text in capitals", send(`{"messageId":"m","role":"user","parts":[{"kind":"text","TEXT":"x"}]}`), CodeInvalidParams, `params.message.parts[0]: member "TEXT"`},
		{"part kind in capitals", send(`{"messageId":"m","role":"user","parts":[{"KIND":"text","text":"x"}]}`), CodeInvalidParams, `"KIND" is not "kind"`},
		{"file uri in capitals", send(`{"messageId":"m","role":"user","parts":[{"kind":"file","file":{"URI":"https://x/y"}}]}`), CodeInvalidParams, `parts[0].file: member "URI"`},
		{"metadata key twice", send(`{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":{"a":1,"a":2}}`), CodeInvalidParams, "params.message.metadata.a: given twice"},
		{"data key twice, deep", send(`{"messageId":"m","role":"user","parts":[{"kind":"data","data":{"x":[{"k":1,"k":1}]}}]}`), CodeInvalidParams, "data.x[0].k: given twice"},
		{"1.0 task id in capitals", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"ID":"a"}}`, CodeInvalidParams, ""},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"id\":\"\xff\"}}", CodeParseError, "not valid UTF-8"},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"tasks/get"} {}`, CodeParseError, "data after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := trees.Load()
			r := call(tc.body)
			if r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("error %+v, want code %d", r.Error, tc.code)
			}
			if !strings.Contains(r.Error.Message+" "+r.Error.detail(), tc.says) {
				t.Fatalf("error %q (%q) does not say %q", r.Error.Message, r.Error.detail(), tc.says)
			}
			if trees.Load() != before {
				t.Fatal("a2a.Tree ran")
			}
		})
	}
	// Exact names, keys that differ in case inside a map, and members
	// JSON-RPC does not define are all fine.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"a2a.Tree","params":{"depth":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"a2a.Tree","extra":{"Method":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"a2a.Tree","params":null}`,
	} {
		before := trees.Load()
		if r := call(body); r.Error != nil || trees.Load() != before+1 {
			t.Fatalf("%s: %+v", body, r.Error)
		}
	}
	r := call(send(`{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":{"a":1,"A":2}}`))
	if r.Error != nil {
		t.Fatalf("metadata keys that differ in case: %+v", r.Error)
	}
}

func TestSchemaOfA2ATypes(t *testing.T) {
	s := schemaOf(reflect.TypeFor[a2a.MessageSendParams]())
	msg := s.fields["message"]
	if msg == nil || msg.kind != structValue || msg.fields["messageId"] == nil || msg.fields["parts"] != knownSchemas()[reflect.TypeFor[a2a.ContentParts]()] {
		t.Fatalf("message schema: %+v", msg)
	}
	if cfg := s.fields["configuration"]; cfg == nil || cfg.fields["historyLength"] == nil || cfg.fields["pushNotificationConfig"] == nil {
		t.Fatalf("configuration schema: %+v", cfg)
	}
	if md := s.fields["metadata"]; md == nil || md.kind != mapValue {
		t.Fatalf("metadata schema: %+v", md)
	}
}

// FuzzStrictJSON checks the strict pass against encoding/json: it accepts
// exactly the JSON texts encoding/json accepts that are valid UTF-8 (refusing
// only repeated names among them), and the envelope it reads is the one
// encoding/json decodes when it finds no repeated or case-variant member.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","Method":"a2a.Tree"}`,
		`{"jsonrpc":"2.0","id":"\u0041","\u006dethod":"x","params":[1,2.5e-3,-0,true,false,null,"\ud83d\ude00"]}`,
		`{"a":{"b":{"c":[{"d":1,"d":2}]}}}`,
		`[]`, `{}`, `null`, `"x"`, `1e400`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `01`, `"\x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := checkJSON(data, anySchema)
		var se *strictError
		isSyntax := err != nil && errors.As(err, &se) && se.kind == strictSyntax
		valid := json.Valid(data) && utf8.Valid(data)
		switch {
		case valid && isSyntax && !strings.Contains(err.Error(), "nested deeper"):
			t.Fatalf("valid JSON refused as a syntax error: %v", err)
		case !valid && err == nil:
			t.Fatalf("invalid JSON accepted: %q", data)
		case err != nil && !isSyntax && (se == nil || se.kind != strictDuplicate):
			t.Fatalf("anySchema refused something but a syntax error or a repeat: %v", err)
		}
		env, err := readEnvelope(data)
		if err != nil {
			return
		}
		var req struct {
			JSONRPC json.RawMessage `json:"jsonrpc"`
			Method  json.RawMessage `json:"method"`
			Params  json.RawMessage `json:"params"`
			ID      json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(data, &req); err != nil {
			if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
				t.Fatalf("the envelope read, encoding/json says %v", err)
			}
			return
		}
		for _, m := range []struct {
			name      string
			got, want []byte
		}{{"jsonrpc", env.jsonrpc, req.JSONRPC}, {"method", env.method, req.Method}, {"params", env.params, req.Params}, {"id", env.id, req.ID}} {
			if !bytes.Equal(compact(m.got), compact(m.want)) {
				t.Fatalf("%s: read %q, encoding/json %q", m.name, m.got, m.want)
			}
		}
	})
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if len(b) == 0 || json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// The strict pass allocates nothing for a typical request (no escaped names,
// small objects).
func TestStrictPassAllocations(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-7","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`)
	s := schemaOf(reflect.TypeFor[a2a.MessageSendParams]())
	env, err := readEnvelope(body)
	if err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if _, err := readEnvelope(body); err != nil {
			t.Fatal(err)
		}
		if err := checkJSON(env.params, s); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// BenchmarkStrictPass is the strict pass over a typical message/send: the
// envelope, then the params against their schema.
func BenchmarkStrictPass(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-7","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`)
	s := schemaOf(reflect.TypeFor[a2a.MessageSendParams]())
	b.ReportAllocs()
	for b.Loop() {
		env, err := readEnvelope(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkJSON(env.params, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnvelopeUnmarshal is what the envelope cost before the strict
// pass: encoding/json into a struct of raw members.
func BenchmarkEnvelopeUnmarshal(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-7","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`)
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  json.RawMessage `json:"method"`
		Params  json.RawMessage `json:"params"`
		ID      json.RawMessage `json:"id"`
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}
