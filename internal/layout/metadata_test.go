package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// metadataFile is the one file that spells agentd's reserved metadata keys.
const metadataFile = "api/metadata.go"

// metadataKey matches a reserved metadata key as a whole string literal.
var metadataKey = regexp.MustCompile(`^agentd/[a-z0-9_]+$`)

// TestMetadataKeysInAPI fails, naming the place, when a non-test Go file
// other than api/metadata.go spells an agentd/ metadata key as a string
// literal (each key is defined once, in api, and used through its constant
// everywhere else), and when api/metadata.go gives one key two names.
func TestMetadataKeysInAPI(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	fset := token.NewFileSet()
	files, keys := 0, 0
	names := map[string]string{} // key -> the constant that names it, in api/metadata.go
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		if rel == metadataFile {
			keys += constKeys(t, f, names)
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && metadataKey.MatchString(s) {
				t.Errorf("%s:%d: metadata key %q spelled outside %s: use api's constant", rel, fset.Position(lit.Pos()).Line, s, metadataFile)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || keys < 30 {
		t.Fatalf("read %d Go files and %d keys in %s; expected the whole tree and every key", files, keys, metadataFile)
	}
}

// constKeys records the constants of f whose value is a metadata key in
// names, failing on a key two constants name, and returns how many it read.
func constKeys(t *testing.T, f *ast.File, names map[string]string) int {
	n := 0
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !metadataKey.MatchString(s) {
					continue
				}
				n++
				name := vs.Names[i].Name
				if other, dup := names[s]; dup {
					t.Errorf("%s: %s and %s both name %q", metadataFile, other, name, s)
				}
				names[s] = name
			}
		}
	}
	return n
}
