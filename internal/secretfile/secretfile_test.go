package secretfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A secret file its group or others may open is refused, naming the file and
// its mode; 0600, 0400 and 0700 are fine, and a root-owned 0640 too (the test
// runs as root or not, and owns its files).
func TestMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o700, true}, {0o644, false}, {0o640, os.Getuid() == 0}, {0o604, false}, {0o660, false}, {0o602, false}} {
		path := filepath.Join(dir, fmt.Sprintf("secret-%o", tc.mode))
		if err := os.WriteFile(path, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := Read(path)
		if tc.ok != (err == nil) {
			t.Errorf("Read, mode %04o: %v", tc.mode, err)
		}
		if tc.ok && string(b) != "s3cret\n" {
			t.Errorf("Read, mode %04o: %q", tc.mode, b)
		}
		if cerr := Check(path); (cerr == nil) != tc.ok {
			t.Errorf("Check, mode %04o: %v", tc.mode, cerr)
		}
		if err != nil && (!errors.Is(err, ErrMode) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("%04o", tc.mode))) {
			t.Errorf("mode %04o: the error %q does not name the file and its mode", tc.mode, err)
		}
	}
	// Through a symbolic link (a Kubernetes secret volume), the file's mode
	// counts.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "secret-644"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(link); !errors.Is(err, ErrMode) {
		t.Errorf("Read of a link to a 0644 file: %v", err)
	}
	if err := Check(link); !errors.Is(err, ErrMode) {
		t.Errorf("Check of a link to a 0644 file: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// A token file holds one non-empty line.
func TestToken(t *testing.T) {
	dir := t.TempDir()
	for content, ok := range map[string]bool{"tok\n": true, "  tok  ": true, "\n": false, "": false, "a\nb\n": false} {
		file := filepath.Join(dir, "tok")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		tok, err := Token(file)
		if (err == nil) != ok || (ok && tok != "tok") {
			t.Errorf("Token(%q) = %q, %v", content, tok, err)
		}
	}
}
