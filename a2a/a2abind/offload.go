package a2abind

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

// BlobOffloader is the task engine's Offloader over agentd's blob store: the
// large parts of a finished task become blobs of that task (read at
// PublicURL's /blobs/ID by whoever may read the task), counted against the
// caller's blob quota. It is safe for concurrent use if Store is.
type BlobOffloader struct {
	// Store keeps content for the ended task owner, created by caller, and
	// returns the blob's id (the supervisor's StoreBlob).
	Store func(owner, caller, mediaType string, content []byte) (id string, err error)
	// PublicURL is the service's public base URL (as ExecutorConfig's);
	// empty leaves agent://blob/ID.
	PublicURL string
}

var _ tasks.Offloader = BlobOffloader{}

// Offload implements tasks.Offloader.
func (o BlobOffloader) Offload(_ context.Context, task a2a.TaskID, owner, mediaType string, content []byte) (string, error) {
	id, err := o.Store(string(task), owner, mediaType, content)
	if err != nil {
		return "", err
	}
	return PublicBlobURL(o.PublicURL, api.BlobURI(id)), nil
}
