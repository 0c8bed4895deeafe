package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// aptStubs is a PATH of stand-ins for what the Makefile's package recipes
// run: apt-get records each call in APT_LOG and, for update, says another apt
// holds the package lists' lock for the first APT_HELD calls (then fails with
// a fetch error if APT_UPDATE_FAILS is set); id says root; apt-cache knows no
// candidate and ls finds no PostgreSQL, so both recipes install; cat, grep
// and sleep are the real ones.
func aptStubs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	stubs := map[string]string{
		"apt-get": `#!/bin/sh
echo "$*" >> "$APT_LOG"
case " $* " in *" update "*)
	n=$(cat "$APT_LOG.held" 2>/dev/null || echo 0)
	if [ "$n" -lt "$APT_HELD" ]; then
		echo $((n + 1)) > "$APT_LOG.held"
		echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
		echo "E: Unable to lock directory /var/lib/apt/lists/" >&2
		exit 100
	fi
	if [ -n "$APT_UPDATE_FAILS" ]; then echo "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease" >&2; exit 100; fi;;
esac
exit 0
`,
		"id":        "#!/bin/sh\necho 0\n",
		"apt-cache": "#!/bin/sh\nexit 0\n",
		"ls":        "#!/bin/sh\nexit 2\n",
	}
	for name, script := range stubs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"cat", "grep", "sleep"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runMake runs the repository's Makefile (three folders up) with targets and vars, its PATH the
// stubs only, and returns its output, its exit and the apt-get calls.
func runMake(t *testing.T, stubs string, env []string, args ...string) (string, []string, error) {
	t.Helper()
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed")
	}
	log := filepath.Join(t.TempDir(), "apt.log")
	cmd := exec.Command(makeBin, append([]string{"-s", "-C", "../../.."}, args...)...)
	cmd.Env = append([]string{"PATH=" + stubs, "HOME=" + t.TempDir(), "APT_LOG=" + log}, env...)
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(log)
	var calls []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			calls = append(calls, l)
		}
	}
	return string(out), calls, err
}

// The Makefile's package installs wait while another apt holds a lock, and
// upgrade nothing (issue 29.14: on a new VM they failed on the lock of the
// first boot's apt): every apt-get call waits for dpkg's lock
// (DPkg::Lock::Timeout), `apt-get update` is retried while the package lists'
// lock is held (apt-get never waits for that one), any other failure of it
// fails at once, and a lock held past APT_LOCK_WAIT fails; each install names
// only its package, without recommends and without upgrading it, and nothing
// runs an upgrade.
func TestMakefileAptWaitsForLocks(t *testing.T) {
	t.Parallel()
	stubs := aptStubs(t)
	const wait = "-o DPkg::Lock::Timeout=600 "
	out, calls, err := runMake(t, stubs, []string{"APT_HELD=2"}, "pg-deps", "chromium", "APT_LOCK_POLL=0")
	if err != nil {
		t.Fatalf("make pg-deps chromium: %v\n%s", err, out)
	}
	want := []string{wait + "update", wait + "update", wait + "update",
		wait + "install -y --no-install-recommends --no-upgrade postgresql",
		wait + "update", wait + "install -y --no-install-recommends --no-upgrade chromium"}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("apt-get calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if n := strings.Count(out, "another apt holds the package lists' lock; waiting"); n != 2 {
		t.Errorf("%d waits reported, want 2:\n%s", n, out)
	}
	for _, c := range calls {
		for _, verb := range []string{" upgrade", "dist-upgrade", "full-upgrade"} {
			if strings.Contains(c, verb) {
				t.Errorf("an upgrade: apt-get %s", c)
			}
		}
	}

	// A lock held past APT_LOCK_WAIT, and any other failure of update: make
	// fails after that one update, installing nothing.
	for _, tc := range []struct {
		name, want string
		env        []string
	}{
		{"the lock held past the wait", "Could not get lock", []string{"APT_HELD=1000"}},
		{"a fetch error", "Failed to fetch", []string{"APT_HELD=0", "APT_UPDATE_FAILS=1"}},
	} {
		out, calls, err := runMake(t, stubs, tc.env, "pg-deps", "APT_LOCK_WAIT=0", "APT_LOCK_POLL=0")
		if err == nil || !strings.Contains(out, tc.want) || len(calls) != 1 || !strings.HasPrefix(calls[0], "-o DPkg::Lock::Timeout=0 update") {
			t.Errorf("%s: make %v, calls %q:\n%s", tc.name, err, calls, out)
		}
	}
}
