package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CardMaxAge is how long, in seconds, a client may cache the agent card
// (Cache-Control: max-age, A2A 1.0 §8.6.1). The card changes only when agentd
// restarts with another configuration, and a client that revalidates after
// this gets a 304 while it has not: five minutes bounds how long a client
// keeps a card a restart changed.
const CardMaxAge = 300

// cachedJSON serves one fixed JSON document, such as the agent card, with the
// HTTP caching A2A 1.0 §8.6.1 asks of card endpoints: Cache-Control with
// max-age CardMaxAge, a strong ETag (a hash of the bytes served),
// Last-Modified (modified, when the document was made), and 304 Not Modified
// to a request whose If-None-Match names that ETag (or "*"), or, without
// If-None-Match, whose If-Modified-Since is not before modified. It is safe
// for concurrent use.
func cachedJSON(body []byte, modified time.Time) http.HandlerFunc {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	lastModified := modified.UTC().Format(http.TimeFormat)
	cacheControl := "public, max-age=" + strconv.Itoa(CardMaxAge)
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", cacheControl)
		h.Set("ETag", etag)
		h.Set("Last-Modified", lastModified)
		if notModified(r, etag, modified) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

// notModified reports whether r's conditional headers say the client's copy,
// of the document with this etag last modified then, is current (RFC 9110
// §13.1.2, §13.1.3): If-None-Match compares entity tags weakly and, when
// present, decides alone; If-Modified-Since is read only without it.
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := r.Header.Values("If-None-Match"); len(inm) > 0 {
		for _, v := range inm {
			for _, tag := range strings.Split(v, ",") {
				tag = strings.TrimSpace(tag)
				if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
					return true
				}
			}
		}
		return false
	}
	ims := r.Header.Get("If-Modified-Since")
	if ims == "" {
		return false
	}
	t, err := http.ParseTime(ims)
	if err != nil {
		return false
	}
	return !modified.Truncate(time.Second).After(t)
}
