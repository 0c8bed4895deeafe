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
	fset := token.NewFileSet()
	files, keys := 0, 0
	names := map[string]string{} // key -> the constant that names it, in api/metadata.go
	eachSourceFile(t, fset, func(rel string, f *ast.File) {
		files++
		if rel == metadataFile {
			keys += constKeys(t, f, names)
			return
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
	})
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

// TestStoreInterfacesInOneFile fails when an interface of package tasks
// that a store (a2a/store/...) names, in code or in a comment, is declared
// outside a2a/tasks/store.go: the interfaces a store implements are read in
// one place.
func TestStoreInterfacesInOneFile(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	declared := map[string]string{} // interface name -> the file of package tasks that declares it
	dir := filepath.Join(root, "a2a", "tasks")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				if ts := spec.(*ast.TypeSpec); isInterface(ts) {
					declared[ts.Name.Name] = name
				}
			}
		}
	}
	named := regexp.MustCompile(`\btasks\.([A-Z]\w*)`)
	seen := map[string]bool{}
	err = filepath.WalkDir(filepath.Join(root, "a2a", "store"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range named.FindAllSubmatch(src, -1) {
			if name := string(m[1]); declared[name] != "" {
				seen[name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range seen {
		if file := declared[name]; file != "store.go" {
			t.Errorf("tasks.%s, which a store implements, is declared in a2a/tasks/%s, not store.go", name, file)
		}
	}
	if len(seen) < 8 {
		t.Fatalf("the stores name %d interfaces of package tasks; expected Store, Durable, Shared and the rest", len(seen))
	}
}

func isInterface(ts *ast.TypeSpec) bool {
	_, ok := ts.Type.(*ast.InterfaceType)
	return ok
}
