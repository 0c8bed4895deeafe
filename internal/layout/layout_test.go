package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/agentd/agentd"

// tier ranks a package of the module by the first element of its path: a
// package may import packages of its own tier or of a lower one. tlsconfig
// is ranked apart (see allowed).
func tier(path string) (rank int, ok bool) {
	rel := strings.TrimPrefix(path, module+"/")
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "cmd":
		return 5, true
	case "server":
		return 4, true
	case "a2a":
		return 3, true
	case "supervisor":
		return 2, true
	case "internal":
		return 1, true
	case "api":
		return 0, true
	}
	return 0, false
}

// allowed reports whether the package from may import the package to, and
// why not when it may not.
func allowed(from, to string) (bool, string) {
	const tls = module + "/tlsconfig"
	if to == tls || strings.HasPrefix(to, tls+"/") {
		if f, ok := tier(from); ok && f >= 3 || strings.HasPrefix(from, tls) {
			return true, ""
		}
		return false, "tlsconfig is used only by cmd, server and a2a"
	}
	if from == tls || strings.HasPrefix(from, tls+"/") {
		if t, ok := tier(to); ok && t <= 1 {
			return true, ""
		}
		return false, "tlsconfig is a leaf: it imports only internal and api"
	}
	f, okf := tier(from)
	t, okt := tier(to)
	if !okf {
		return false, "the package is outside the tiers (cmd, server, a2a, supervisor, internal, api, tlsconfig)"
	}
	if !okt {
		return false, "the imported package is outside the tiers"
	}
	if t > f {
		return false, "imports a package of a higher tier"
	}
	return true, ""
}

type pkg struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// TestTiers reads the module's import graph (non-test imports) and fails,
// naming each import, when a package imports one of a higher tier.
func TestTiers(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		n++
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if ok, why := allowed(p.ImportPath, imp); !ok {
				t.Errorf("%s imports %s: %s", strings.TrimPrefix(p.ImportPath, module+"/"), strings.TrimPrefix(imp, module+"/"), why)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list named %d packages of the module; expected the whole tree", n)
	}
}

// TestAllowed pins the rule itself, so a mistake in it cannot pass every
// import.
func TestAllowed(t *testing.T) {
	cases := []struct {
		from, to string
		ok       bool
	}{
		{"cmd/agentd", "server", true},
		{"server", "a2a/tasks", true},
		{"a2a/tasks", "supervisor", true},
		{"supervisor", "internal/budget", true},
		{"internal/agent", "api", true},
		{"supervisor/delegate", "supervisor", true},
		{"supervisor", "a2a/tasks", false},
		{"internal/a2atest", "supervisor/delegate", false},
		{"api", "internal/budget", false},
		{"a2a/peer", "server", false},
		{"server", "cmd/agentd", false},
		{"a2a/peer", "tlsconfig", true},
		{"supervisor", "tlsconfig", false},
		{"tlsconfig", "supervisor", false},
		{"tlsconfig", "api", true},
		{"tools/x", "api", false},
	}
	for _, c := range cases {
		ok, _ := allowed(module+"/"+c.from, module+"/"+c.to)
		if ok != c.ok {
			t.Errorf("allowed(%s, %s) = %v, want %v", c.from, c.to, ok, c.ok)
		}
	}
}
