package layout

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// wireSentinels are the package-level sentinel errors whose text is what a
// client reads (a task's status message, a JSON-RPC error's message or
// detail, a subagent's tool result, a docs table, an e2e assertion): their
// text stays as it is, without the package prefix, so that the wire does not
// change. Keyed by package name and variable.
var wireSentinels = map[string]string{
	"a2abind.errBadDelegation":          "the refused task's status message (Executor.Execute)",
	"a2abind.ErrCycle":                  "the refused task's status message (delegation refused: ...)",
	"a2abind.ErrDepthExhausted":         "the refused task's status message; docs/ARCHITECTURE.md quotes it",
	"tasks.errDrained":                  "the cancelled queued task's status message",
	"tasks.errCancelRequested":          "the status message of a task cancelled while queued or starting",
	"tasks.errBadPageToken":             "the JSON-RPC error of ListTasks",
	"tasks.ErrPushRefused":              "the JSON-RPC error of a refused webhook",
	"api.ErrMissingObjective":           "the spawn refusal (docs/ARCHITECTURE.md §5 table, docs/nesting.md)",
	"delegate.ErrUnsupportedCapability": "the refusal code the e2e suite and docs/mesh.md assert",
	"supervisor.errNotFound":            "the exec self-tool's result (exec: \"prog\": not found in PATH)",
	"mcp.errNotConnected":               "a tool result's and the readiness report's reason",
	"intelligence.ErrUnreachable":       "a crashed subagent's result detail (cause intelligence_unreachable), its text from when it was package agent's",
}

// TestSentinelPrefix fails when a package-level sentinel error of a non-main
// package (var X = errors.New("...") or fmt.Errorf("...")) has a text that
// does not start with its package's name and a colon, as the house style
// asks (errors.New("exec: WaitDelay expired before I/O complete")), unless it
// is one of wireSentinels.
func TestSentinelPrefix(t *testing.T) {
	fset := token.NewFileSet()
	seen, waived := 0, map[string]bool{}
	eachSourceFile(t, fset, func(rel string, f *ast.File) {
		pkg := f.Name.Name
		if pkg == "main" {
			return
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					text, ok := sentinelText(v)
					if !ok {
						continue
					}
					seen++
					key := pkg + "." + vs.Names[i].Name
					if _, ok := wireSentinels[key]; ok {
						waived[key] = true
						continue
					}
					if !strings.HasPrefix(text, pkg+": ") {
						t.Errorf("%s:%d: %s's text %q does not start with %q", rel, fset.Position(v.Pos()).Line, key, text, pkg+": ")
					}
				}
			}
		}
	})
	for key := range wireSentinels {
		if !waived[key] {
			t.Errorf("wireSentinels names %s, which is no longer a package-level sentinel: drop it", key)
		}
	}
	if seen < 40 {
		t.Fatalf("found %d sentinels; expected the whole tree's", seen)
	}
}

// sentinelText returns the text of errors.New("...") or fmt.Errorf("...", ...).
func sentinelText(e ast.Expr) (string, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok || !(x.Name == "errors" && sel.Sel.Name == "New" || x.Name == "fmt" && sel.Sel.Name == "Errorf") {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
