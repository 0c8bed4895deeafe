package server

import (
	"net/http"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/api"
)

// BlobSource serves stored distillates (store-and-reference results) by id.
// The supervisor implements it. Implementations are safe for concurrent use.
type BlobSource interface {
	// ReadBlob returns a blob's content and media type, and the A2A task id
	// of the root of the tree that stored it: reading the blob is reading
	// that task.
	ReadBlob(id string) (content []byte, mediaType, task string, ok bool)
}

// BlobPath is the route of a stored distillate; a2a maps agent://blob/ID to
// the public URL with this path.
const BlobPath = "/blobs/{id}"

// serveBlob answers GET /blobs/{id} with the blob's bytes to whoever may read
// the task that stored it (h decides, as for tasks/get: its creator or an
// operator), and 404 to anyone else, as when the id is malformed, unknown or
// past its retention window: a blob's existence is never confirmed to a
// caller who may not read it.
func serveBlob(src BlobSource, h a2asrv.RequestHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		if !api.ValidBlobID(id) {
			http.NotFound(w, r)
			return
		}
		content, mediaType, task, ok := src.ReadBlob(id)
		if !ok || task == "" {
			http.NotFound(w, r)
			return
		}
		none := 0
		if _, err := h.OnGetTask(r.Context(), &a2a.TaskQueryParams{ID: a2a.TaskID(task), HistoryLength: &none}); err != nil {
			http.NotFound(w, r)
			return
		}
		if mediaType == "" {
			mediaType = "application/octet-stream"
		}
		h := w.Header()
		h.Set("Content-Type", mediaType)
		h.Set("Content-Length", strconv.Itoa(len(content)))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "private, no-store")
		h.Set("Content-Security-Policy", "sandbox")
		w.Write(content)
	}
}
