package peer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/a2a/a2acall"
)

// The 0.3 card of a2a-go's own server, the 1.0 card of the JavaScript SDK's
// (with its 0.3 compatibility on), and agentd's (both shapes at once).
const (
	card03 = `{"name":"go","url":"http://p/rpc","preferredTransport":"JSONRPC","protocolVersion":"0.3.0",
		"additionalInterfaces":[{"url":"http://p/grpc","transport":"GRPC"}],"capabilities":{"streaming":true}}`
	card10 = `{"name":"js","supportedInterfaces":[{"url":"http://p/","protocolBinding":"JSONRPC","tenant":"","protocolVersion":"1.0"},
		{"url":"http://p/","protocolBinding":"JSONRPC","tenant":"","protocolVersion":"0.3"}],
		"capabilities":{"streaming":true,"pushNotifications":false,"extensions":[]},"securitySchemes":{},"signatures":[]}`
	cardBoth = `{"name":"agentd","url":"http://p/","protocolVersion":"0.3.0","preferredTransport":"JSONRPC",
		"supportedInterfaces":[{"url":"http://p/","protocolBinding":"JSONRPC","protocolVersion":"1.0"},
		{"url":"http://p/","protocolBinding":"JSONRPC","protocolVersion":"0.3"}],
		"capabilities":{"extensions":[{"uri":"https://github.com/agentd/agentd/a2a/extensions/contract/v1","params":{"instance":"B"}}]}}`
)

func TestParseCard(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []Interface
		streaming  bool
	}{
		{"0.3", card03, []Interface{{"http://p/rpc", "JSONRPC", "0.3"}, {"http://p/grpc", "GRPC", "0.3"}}, true},
		{"1.0", card10, []Interface{{"http://p/", "JSONRPC", "1.0"}, {"http://p/", "JSONRPC", "0.3"}}, true},
		{"both", cardBoth, []Interface{{"http://p/", "JSONRPC", "1.0"}, {"http://p/", "JSONRPC", "0.3"}, {"http://p/", "JSONRPC", "0.3"}}, false},
		// 0.3's defaults: no protocolVersion is 0.3, no transport JSON-RPC;
		// a 1.0 interface without a version is 1.0; bindings upper-cased.
		{"defaults", `{"url":"http://p/","supportedInterfaces":[{"url":"http://q/","protocolBinding":"http+json"}]}`,
			[]Interface{{"http://q/", "HTTP+JSON", "1.0"}, {"http://p/", "JSONRPC", "0.3"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := parseCard([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(pc.interfaces) != len(tc.want) {
				t.Fatalf("interfaces %+v, want %+v", pc.interfaces, tc.want)
			}
			for i := range tc.want {
				if pc.interfaces[i] != tc.want[i] {
					t.Fatalf("interface %d: %+v, want %+v", i, pc.interfaces[i], tc.want[i])
				}
			}
			if pc.card.Capabilities.Streaming != tc.streaming {
				t.Fatalf("streaming %v", pc.card.Capabilities.Streaming)
			}
		})
	}
	pc, err := parseCard([]byte(cardBoth))
	if err != nil || !hasContractExtension(pc.card) || pc.card.Capabilities.Extensions[0].Params["instance"] != "B" {
		t.Fatalf("agentd's card: the contract extension was not read: %+v %v", pc, err)
	}
}

// A card of the wrong types, or one that lists nowhere to call, is an error
// that says so.
func TestParseCardRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`[]`, "cannot unmarshal array"},
		{`"card"`, "cannot unmarshal string"},
		{`{"url":7}`, "cannot unmarshal number"},
		{`{"supportedInterfaces":{"url":"http://p/"}}`, "cannot unmarshal object"},
		{`{"supportedInterfaces":[{"url":"http://p/","protocolVersion":1.0}]}`, "cannot unmarshal number"},
		{`{"capabilities":{"streaming":"yes"},"url":"http://p/"}`, "cannot unmarshal string"},
		{`{"name":"nothing to call"}`, "lists no interface"},
		{`{"url":"http://p/"`, "unexpected end"},
	} {
		if _, err := parseCard([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseCard(%s) = %v, want an error with %q", tc.body, err, tc.want)
		}
	}
}

func TestChoose(t *testing.T) {
	jsonrpc := a2acall.JSONRPC()
	stub := func(string, *http.Client, a2acall.Options) (a2acall.Transport, error) { return nil, nil }
	all := a2acall.JSONRPC()
	all[a2acall.Key{Version: "1.0", Binding: "GRPC"}] = stub
	all[a2acall.Key{Version: "1.0", Binding: "HTTP+JSON"}] = stub
	v10 := func(b string) Interface { return Interface{"http://p/" + b, b, "1.0"} }
	v03 := func(b string) Interface { return Interface{"http://p/" + b, b, "0.3"} }
	for _, tc := range []struct {
		name             string
		card             []Interface
		reg              a2acall.Registry
		version, binding string
		want             Interface
		err              string
	}{
		{name: "1.0 over 0.3, whatever the order", card: []Interface{v03("JSONRPC"), v10("JSONRPC")}, reg: jsonrpc, want: v10("JSONRPC")},
		{name: "0.3 where only that", card: []Interface{v03("GRPC"), v03("JSONRPC")}, reg: jsonrpc, want: v03("JSONRPC")},
		{name: "the card's first binding agentd calls", card: []Interface{v10("GRPC"), v10("HTTP+JSON"), v10("JSONRPC")}, reg: all, want: v10("GRPC")},
		{name: "a binding agentd does not call is passed over", card: []Interface{v10("GRPC"), v10("JSONRPC")}, reg: jsonrpc, want: v10("JSONRPC")},
		{name: "a 1.0 binding agentd lacks falls back to 0.3", card: []Interface{v10("GRPC"), v03("JSONRPC")}, reg: jsonrpc, want: v03("JSONRPC")},
		{name: "pinned version", card: []Interface{v10("JSONRPC"), v03("JSONRPC")}, reg: jsonrpc, version: "0.3", want: v03("JSONRPC")},
		{name: "pinned binding", card: []Interface{v10("GRPC"), v10("JSONRPC")}, reg: all, binding: "JSONRPC", want: v10("JSONRPC")},
		{name: "both pinned and not offered: called anyway", card: []Interface{v10("JSONRPC")}, reg: jsonrpc, version: "0.3", binding: "JSONRPC", want: Interface{Version: "0.3", Binding: "JSONRPC"}},
		{name: "an unknown version is passed over", card: []Interface{{"http://p/", "JSONRPC", "2.0"}}, reg: jsonrpc, err: "it offers 2.0/JSONRPC; agentd calls 0.3/JSONRPC, 1.0/JSONRPC"},
		{name: "pinned version not offered", card: []Interface{v10("JSONRPC")}, reg: jsonrpc, version: "0.3", err: "it offers 1.0/JSONRPC; agentd calls 0.3/JSONRPC"},
		{name: "nothing in common", card: []Interface{v10("GRPC")}, reg: jsonrpc, err: "it offers 1.0/GRPC; agentd calls 0.3/JSONRPC, 1.0/JSONRPC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := choose(tc.card, tc.reg, tc.version, tc.binding)
			if tc.err != "" {
				if !errors.Is(err, ErrNoInterface) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("choose = %+v, %v; want ErrNoInterface with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("choose = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCacheTTL(t *testing.T) {
	def := 5 * time.Minute
	for _, tc := range []struct {
		header []string
		want   time.Duration
	}{
		{nil, def},
		{[]string{"public, max-age=3600"}, time.Hour},
		{[]string{"max-age=0"}, 0},
		{[]string{`max-age="60"`}, time.Minute},
		{[]string{"no-cache"}, 0},
		{[]string{"max-age=600, no-store"}, 0},
		{[]string{"public", "MAX-AGE=120"}, 2 * time.Minute},
		{[]string{"max-age=-5"}, def},
		{[]string{"max-age=soon"}, def},
		{[]string{"max-age=99999999999999999999"}, def},
		{[]string{"max-age=31536000"}, maxCardTTL},
		{[]string{"private"}, def},
	} {
		h := http.Header{}
		for _, v := range tc.header {
			h.Add("Cache-Control", v)
		}
		if got := cacheTTL(h, def); got != tc.want {
			t.Errorf("Cache-Control %q: %s, want %s", tc.header, got, tc.want)
		}
	}
}

// The card is read again once its max-age has passed, not before; a card
// that names another origin does not move the calls there.
func TestCardCachedAsItsMaxAgeAllows(t *testing.T) {
	reads := make(chan struct{}, 10)
	maxAge := "max-age=3600"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads <- struct{}{}
		if r.Header.Get("A2A-Version") != "1.0" {
			t.Errorf("the card was asked for without A2A-Version: 1.0")
		}
		w.Header().Set("Cache-Control", maxAge)
		w.Write([]byte(`{"supportedInterfaces":[{"url":"http://elsewhere.example/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`))
	}))
	defer srv.Close()
	p := newPeer(t, srv.URL, nil)
	ctx := context.Background()
	for range 3 {
		if err := p.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(reads); n != 1 {
		t.Fatalf("the card was read %d times within its max-age, want 1", n)
	}
	h, in, _, _, _ := p.state()
	p.release(h, false)
	if in.URL != srv.URL || in.Version != "1.0" {
		t.Fatalf("calls go to %+v; want the configured origin %s in 1.0", in, srv.URL)
	}
	p.mu.Lock()
	p.read = time.Now().Add(-time.Hour - time.Second) // the hour has passed
	p.mu.Unlock()
	maxAge = "no-store"
	for range 2 {
		if err := p.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(reads); n != 3 {
		t.Fatalf("the card was read %d times; want 3 (again after its max-age, then each time under no-store)", n)
	}
}

// A card over the size limit is refused without being read whole.
func TestHugeCardRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"name":"`))
		w.Write([]byte(strings.Repeat("x", 2*maxCard)))
		w.Write([]byte(`","url":"` + "http://" + r.Host + `/"}`))
	}))
	defer srv.Close()
	p := newPeer(t, srv.URL, nil)
	if err := p.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "over 1048576 bytes") {
		t.Fatalf("a 2 MiB card: %v", err)
	}
}

func FuzzParseCard(f *testing.F) {
	for _, s := range []string{card03, card10, cardBoth, `{}`, `{"url":""}`, `{"supportedInterfaces":[{}]}`, `null`} {
		f.Add([]byte(s))
	}
	reg := a2acall.JSONRPC()
	f.Fuzz(func(t *testing.T, body []byte) {
		pc, err := parseCard(body)
		if err != nil {
			return
		}
		if len(pc.interfaces) == 0 || pc.card == nil {
			t.Fatalf("parseCard(%q) = %+v without an error", body, pc)
		}
		for _, in := range pc.interfaces {
			if in.Binding == "" || in.Version == "" {
				t.Fatalf("parseCard(%q): interface %+v without a binding or a version", body, in)
			}
		}
		if in, err := choose(pc.interfaces, reg, "", ""); err == nil && reg[in.Key()] == nil {
			t.Fatalf("chose %+v, which agentd does not call", in)
		}
	})
}
