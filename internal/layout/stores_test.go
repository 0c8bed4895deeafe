package layout

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestStoresNeedOnlyTheBlobStore: the durable task stores and their shared
// tests implement the blob store's Backend with package supervisor/blob
// alone; none depends, even through another package, on the supervisor
// itself (its process tree, its children, its tool sessions).
func TestStoresNeedOnlyTheBlobStore(t *testing.T) {
	stores := []string{"a2a/store/sqlite", "a2a/store/postgres", "a2a/tasks/storetest"}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for _, s := range stores {
		args = append(args, module+"/"+s)
	}
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(stores) {
		t.Fatalf("go list named %d packages, want %d:\n%s", len(lines), len(stores), out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		name, deps := strings.TrimPrefix(fields[0], module+"/"), fields[1:]
		if !slices.Contains(deps, module+"/supervisor/blob") {
			t.Errorf("%s does not use supervisor/blob: the test no longer checks what it names", name)
		}
		if slices.Contains(deps, module+"/supervisor") {
			t.Errorf("%s depends on the whole supervisor; it needs only supervisor/blob", name)
		}
	}
}
