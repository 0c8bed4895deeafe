package mcp

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/api"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://mcp.example/mcp", true},
		{"https://10.0.0.5:8443/mcp", true},
		{"http://127.0.0.1:3001/mcp", true},
		{"http://127.8.9.10/mcp", true},
		{"http://[::1]:3001/mcp", true},
		{"http://localhost:3001/mcp", true},
		{"http://LocalHost/mcp", true},
		{"http://mcp.example/mcp", false},
		{"http://10.0.0.5/mcp", false},
		{"http://0.0.0.0:3001/mcp", false},
		{"http://localhost.evil.example/mcp", false},
		{"ftp://127.0.0.1/mcp", false},
		{"https:///mcp", false},
		{"/mcp", false},
		{"https://user:pw@mcp.example/mcp", false},
		{"https://mcp.example/mcp#frag", false},
		{"::", false},
	} {
		if err := CheckURL(tc.url); (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
	if err := CheckURL("https://user:pw@mcp.example/mcp"); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("credentials must not be echoed: %v", err)
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"github": true, "a": true, "a-b_c9": true, "9x": true,
		"": false, "-a": false, "_a": false, "a/b": false, "a.b": false, "a b": false,
		"subagent": false, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false,
	} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestParseTags(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want TagRule
		ok   bool
	}{
		{"gh=untrusted_input,egress", TagRule{Server: "gh", Tags: api.ToolTags{UntrustedInput: true, Egress: true}}, true},
		{"gh/create_issue=egress", TagRule{Server: "gh", Tool: "create_issue", Tags: api.ToolTags{Egress: true}}, true},
		{"vault= sensitive ", TagRule{Server: "vault", Tags: api.ToolTags{Sensitive: true}}, true},
		{"notes=none", TagRule{Server: "notes"}, true},
		{"notes=", TagRule{Server: "notes"}, true},
		{"notes", TagRule{}, false},
		{"=egress", TagRule{}, false},
		{"gh=egres", TagRule{}, false},
		{"gh/=egress", TagRule{}, false},
		{"gh/*=egress", TagRule{}, false},
		{"gh=egress,,sensitive", TagRule{}, false},
	} {
		got, err := ParseTags(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseTags(%q) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseToolList(t *testing.T) {
	name, tools, err := ParseToolList("gh=search_issues, get_issue")
	if err != nil || name != "gh" || strings.Join(tools, "|") != "search_issues|get_issue" {
		t.Fatalf("= %q %q %v", name, tools, err)
	}
	for _, bad := range []string{"gh", "gh=", "gh=a,,b", "gh=a b", "=a", "sub agent=a"} {
		if _, _, err := ParseToolList(bad); err == nil {
			t.Errorf("ParseToolList(%q) accepted", bad)
		}
	}
}

func TestTokenEnv(t *testing.T) {
	if got := TokenEnv("git-hub_2"); got != "AGENT_MCP_TOKEN_GIT_HUB_2" {
		t.Fatal(got)
	}
}

// The tagger: a tool's own rule beats its server's; untagged is reported as
// such; GateRefs covers every tool a root grant could hold.
func TestTaggerAndGateRefs(t *testing.T) {
	cfg := Config{
		Servers: []ServerConfig{{Name: "gh", URL: "https://gh.example/mcp"}, {Name: "vault", URL: "https://v.example/mcp"}, {Name: "web", URL: "https://w.example/mcp"}},
		Tags: []TagRule{
			{Server: "gh", Tags: api.ToolTags{UntrustedInput: true}},
			{Server: "gh", Tool: "post", Tags: api.ToolTags{Egress: true}},
			{Server: "vault", Tags: api.ToolTags{Sensitive: true}},
		},
		Grant: map[string][]string{"vault": {"read"}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tag := cfg.Tagger()
	if tags, ok := tag(api.ToolRef{Server: "gh", Tool: "post"}); !ok || tags != (api.ToolTags{Egress: true}) {
		t.Errorf("gh/post = %+v", tags)
	}
	if tags, ok := tag(api.ToolRef{Server: "gh", Tool: "search"}); !ok || tags != (api.ToolTags{UntrustedInput: true}) {
		t.Errorf("gh/search = %+v", tags)
	}
	if _, ok := tag(api.ToolRef{Server: "web", Tool: "fetch"}); ok {
		t.Error("web/fetch is untagged")
	}
	var got []string
	for _, r := range cfg.GateRefs() {
		got = append(got, r.String())
	}
	if strings.Join(got, " ") != "gh/* gh/post vault/read web/*" {
		t.Errorf("GateRefs = %v", got)
	}

	for _, bad := range []Config{
		{Servers: []ServerConfig{{Name: "a", URL: "https://a.example"}, {Name: "a", URL: "https://b.example"}}},
		{Servers: []ServerConfig{{Name: "a", URL: "http://a.example"}}},
		{Servers: []ServerConfig{{Name: "a", URL: "https://a.example"}}, Tags: []TagRule{{Server: "b"}}},
		{Servers: []ServerConfig{{Name: "a", URL: "https://a.example"}}, Grant: map[string][]string{"b": {"x"}}},
		{Servers: []ServerConfig{{Name: "a", URL: "https://a.example"}}, Grant: map[string][]string{"a": nil}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", bad)
		}
	}
}

// Results over the cap are cut on a rune boundary with a note; structured
// content over the cap is dropped with a note; other content is described.
func TestConvertResult(t *testing.T) {
	res := &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: "abc"},
		&sdk.TextContent{Text: strings.Repeat("é", 10)}, // 20 bytes
		&sdk.TextContent{Text: "never shown"},
	}}
	out := convertResult("s/t", res, 10)
	if len(out.Content) != 3 || out.Content[0].Text != "abc" || out.Content[1].Text != "ééé" {
		t.Fatalf("content = %+v", out.Content)
	}
	if !utf8.ValidString(out.Text()) || !strings.Contains(out.Content[2].Text, "9 of 34 bytes shown; the cap is 10 bytes") {
		t.Fatalf("note = %q", out.Content[2].Text)
	}

	res = &sdk.CallToolResult{
		IsError:           true,
		StructuredContent: map[string]any{"k": strings.Repeat("x", 50)},
		Content: []sdk.Content{
			&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("1234")},
			&sdk.ResourceLink{URI: "file:///a", Name: "a", Description: "the a"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b", Text: "bee"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///c", MIMEType: "application/zip", Blob: []byte("zz")}},
		},
	}
	out = convertResult("s/t", res, 1000)
	want := "[audio audio/wav, 4 bytes: not shown]\n[resource link file:///a (a): the a]\n[resource file:///b]\nbee\n[resource file:///c application/zip, 2 bytes: not shown]"
	if !out.IsError || out.Text() != want || string(out.StructuredContent) != `{"k":"`+strings.Repeat("x", 50)+`"}` {
		t.Fatalf("out = %+v\n%s", out, out.Text())
	}
	out = convertResult("s/t", res, 40)
	if out.StructuredContent != nil || !strings.Contains(out.Text(), "structured content of 58 bytes dropped: over the cap of 40 bytes") {
		t.Fatalf("over-cap structured content: %+v", out)
	}
	if out := convertResult("s/t", &sdk.CallToolResult{}, 10); out.Content == nil || out.IsError {
		t.Fatalf("empty result: %+v", out)
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 2*time.Second
	for n := 0; n < 40; n++ {
		base := lo << min(n, 5)
		if base > hi {
			base = hi
		}
		for i := 0; i < 20; i++ {
			d := backoff(n, lo, hi)
			if d < base*3/4 || d > base*5/4 {
				t.Fatalf("backoff(%d) = %s, want within 25%% of %s", n, d, base)
			}
		}
	}
}

// The default HTTP client speaks TLS 1.3 at least: an MCP server that offers
// only TLS 1.2 fails the handshake.
func TestDefaultClientIsTLS13(t *testing.T) {
	var o Options
	o.setDefaults()
	tr, ok := o.HTTPClient.Transport.(*http.Transport)
	if !ok || tr.TLSClientConfig == nil || tr.TLSClientConfig.MinVersion != tls.VersionTLS13 {
		t.Fatalf("default transport %T: TLS config %+v, want MinVersion TLS 1.3", o.HTTPClient.Transport, tr.TLSClientConfig)
	}
	for _, max := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		srv.TLS = &tls.Config{MaxVersion: max}
		srv.StartTLS()
		// The default transport, trusting the test server's certificate.
		c := tr.Clone()
		c.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		resp, err := (&http.Client{Transport: c}).Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) != (max == tls.VersionTLS13) {
			t.Errorf("server with TLS max %x: err %v", max, err)
		}
		c.CloseIdleConnections()
		srv.Close()
	}
}
