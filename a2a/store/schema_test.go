package store

import (
	"slices"
	"testing"
	"testing/fstest"
)

func TestEmbeddedSchema(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/0002_b.sql": {Data: []byte("two")},
		"migrations/0001_a.sql": {Data: []byte("one")},
		"migrations/0003_c.sql": {Data: []byte("three")},
		"migrations/README":     {Data: []byte("not a migration")},
		"other/0004_d.sql":      {Data: []byte("elsewhere")},
	}
	s := EmbeddedSchema(fsys)
	if s.Version != 3 {
		t.Fatalf("Version %d, want 3", s.Version)
	}
	if got := s.Texts(); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("Texts %q, want the three migrations in name order", got)
	}
}
