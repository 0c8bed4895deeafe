package store

import (
	"io/fs"
	"sort"
	"sync"
)

// Schema is a store's embedded schema migrations: the files matching
// migrations/*.sql, one a version, in name order.
type Schema struct {
	// Version is how many migrations there are: the schema version the
	// store writes and reads.
	Version int
	// Texts returns the migrations' SQL, in order. The files are read on
	// its first call, so a process that opens no store (a subagent, a
	// client command) does not copy them; it is safe for concurrent use.
	Texts func() []string
}

// EmbeddedSchema reads the names of fsys's migrations (only the names: the
// files are read by Texts). It panics if fsys cannot be read, as only an
// embedded file system is meant.
func EmbeddedSchema(fsys fs.FS) Schema {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	return Schema{Version: len(names), Texts: sync.OnceValue(func() []string {
		out := make([]string, len(names))
		for i, n := range names {
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				panic(err)
			}
			out[i] = string(b)
		}
		return out
	})}
}
