package agentsfile

import (
	"regexp"
	"strings"
	"testing"
)

// validName accepts exactly the names the pattern it replaced did.
func TestValidNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	for _, name := range []string{
		"", "a", "0", "-", "_", "a-", "a_", "-a", "_a", "A", "aB", "a b", "a.b", "é", "a\n",
		"reviewer", "code-review_2", strings.Repeat("a", 64), strings.Repeat("a", 65), "a" + strings.Repeat("-", 63),
	} {
		if got, want := validName(name), pattern.MatchString(name); got != want {
			t.Errorf("validName(%q) = %v, the pattern says %v", name, got, want)
		}
	}
}
