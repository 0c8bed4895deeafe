package mcp

import (
	"strings"
	"testing"
)

// FuzzParseServer: --mcp NAME=URL never panics, and whatever it accepts has a
// valid name and a URL that is https or loopback http, and parses the same
// again.
func FuzzParseServer(f *testing.F) {
	for _, s := range []string{"gh=https://mcp.example/mcp", "e=http://127.0.0.1:3001/mcp", "x=http://10.0.0.1/", "=https://a", "a/b=https://a", "subagent=https://a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseServer(s)
		if err != nil {
			return
		}
		if CheckName(sc.Name) != nil || CheckURL(sc.URL) != nil {
			t.Fatalf("accepted %q as %+v", s, sc)
		}
		if !strings.HasPrefix(sc.URL, "https://") && !strings.HasPrefix(sc.URL, "http://") {
			t.Fatalf("accepted scheme of %q", sc.URL)
		}
		again, err := ParseServer(sc.Name + "=" + sc.URL)
		if err != nil || again != sc {
			t.Fatalf("%q: round trip %+v, %v", s, again, err)
		}
	})
}

// FuzzParseTags: --mcp-tags never panics, and what it accepts renders back to
// a rule that parses the same.
func FuzzParseTags(f *testing.F) {
	for _, s := range []string{"gh=untrusted_input,egress", "gh/post=egress", "v=sensitive", "n=none", "n=", "x=bogus", "a/=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseTags(s)
		if err != nil {
			return
		}
		target := r.Server
		if r.Tool != "" {
			target += "/" + r.Tool
		}
		var legs []string
		if r.Tags.UntrustedInput {
			legs = append(legs, "untrusted_input")
		}
		if r.Tags.Sensitive {
			legs = append(legs, "sensitive")
		}
		if r.Tags.Egress {
			legs = append(legs, "egress")
		}
		again, err := ParseTags(target + "=" + strings.Join(legs, ","))
		if err != nil || again != r {
			t.Fatalf("%q: %+v, round trip %+v, %v", s, r, again, err)
		}
	})
}

// FuzzParseToolList: --mcp-tools never panics, and accepts only valid names.
func FuzzParseToolList(f *testing.F) {
	for _, s := range []string{"gh=a,b", "gh=search_issues, get_issue", "gh=", "gh=a,,b", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, tools, err := ParseToolList(s)
		if err != nil {
			return
		}
		if CheckName(name) != nil || len(tools) == 0 {
			t.Fatalf("accepted %q", s)
		}
		for _, tool := range tools {
			if checkTool(tool) != nil || strings.Contains(tool, ",") {
				t.Fatalf("accepted tool %q in %q", tool, s)
			}
		}
	})
}
