// Package store holds what agentd's durable task stores share: the encoding
// of snapshots and push configs in their databases, and the errors of
// opening one. The stores are its subpackages: sqlite (the embedded store in
// the state directory, the default of `agentd serve`) and postgres (several
// replicas on one database). Both implement tasks.Store, tasks.Durable and
// tasks.PushJournal and pass the conformance suite in tasks/storetest.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
)

// ErrSchemaNewer refuses a database whose schema a newer agentd wrote: this
// binary does not know its tables, and changing nothing is the only safe
// answer.
var ErrSchemaNewer = errors.New("store: the database schema is newer than this agentd knows")

// SchemaError is ErrSchemaNewer with the versions.
type SchemaError struct {
	Where      string // the database: a path, or a DSN without its password
	Found, Max int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("store: %s has schema version %d, newer than this agentd knows (%d): run the agentd that wrote it, or a newer one", e.Where, e.Found, e.Max)
}

func (e *SchemaError) Unwrap() error { return ErrSchemaNewer }

// EncodeTask is a snapshot as a database holds it (its A2A JSON).
func EncodeTask(t *a2a.Task) ([]byte, error) {
	// The task's own encoder, called directly: json.Marshal would only
	// compact and re-escape what json.Marshal wrote inside it, a second pass
	// over every byte of every snapshot. The bytes are the same.
	b, err := t.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("store: encode task %s: %w", t.ID, err)
	}
	return b, nil
}

// DecodeTask reads a snapshot back.
func DecodeTask(b []byte) (*a2a.Task, error) {
	var t a2a.Task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("store: decode task: %w", err)
	}
	return &t, nil
}

// EncodePush is a webhook's config as a database holds it.
func EncodePush(c a2a.PushConfig) ([]byte, error) { return json.Marshal(c) }

// DecodePush reads a webhook's config back.
func DecodePush(b []byte, version string) (tasks.PushTarget, error) {
	var c a2a.PushConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return tasks.PushTarget{}, fmt.Errorf("store: decode push config: %w", err)
	}
	return tasks.PushTarget{Config: c, Version: version}, nil
}

// Nanos is a time as the stores order by it: Unix nanoseconds, 0 for the
// zero time.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Unavailable wraps a database error as tasks.ErrStoreUnavailable, with the
// operation.
func Unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %v", op, tasks.ErrStoreUnavailable, err)
}

// Report is what `agentd store inspect` shows of a store.
type Report struct {
	Store      string                 `json:"store"`  // sqlite or postgres
	Where      string                 `json:"where"`  // the database file, or the DSN without its password
	Schema     int                    `json:"schema"` // the schema version of the database
	Tasks      map[string]int         `json:"tasks"`  // by state
	Unfinished int                    `json:"unfinished"`
	Orphans    int                    `json:"orphans"`      // unfinished tasks whose runner is gone (the next start resolves them)
	Runners    map[string]RunnerState `json:"runners"`      // the instances running unfinished tasks
	Pending    int                    `json:"pending_push"` // push notifications not yet delivered
	Blobs      int                    `json:"blobs"`        // stored distillates
	BlobBytes  int64                  `json:"blob_bytes"`
	Bytes      int64                  `json:"bytes,omitempty"` // the database's size on disk, when known
}

// RunnerState is one runner of unfinished tasks: whether it lives and how
// many it runs.
type RunnerState struct {
	Alive bool `json:"alive"`
	Tasks int  `json:"tasks"`
}

// Pruned is what `agentd store prune` removed.
type Pruned struct {
	Tasks int `json:"tasks"` // finished tasks (with their webhooks and pending notifications)
	Blobs int `json:"blobs"` // expired stored distillates
}
