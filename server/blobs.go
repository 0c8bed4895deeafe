package server

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/api"
)

// BlobSource serves stored distillates (store-and-reference results) by id.
// The supervisor implements it. Implementations are safe for concurrent use.
type BlobSource interface {
	ReadBlob(id string) (content []byte, mediaType string, ok bool)
}

// BlobPath is the route of a stored distillate; a2a maps agent://blob/ID to
// the public URL with this path.
const BlobPath = "/blobs/{id}"

// serveBlob answers GET /blobs/{id} with the blob's bytes, or 404 when the id
// is malformed, unknown or past its retention window.
//
// Reads are not yet tied to the caller's identity: the id is a random v4 UUID
// the caller learns only from its own task's artifact.
func serveBlob(src BlobSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		if !api.ValidBlobID(id) {
			http.NotFound(w, r)
			return
		}
		content, mediaType, ok := src.ReadBlob(id)
		if !ok {
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
