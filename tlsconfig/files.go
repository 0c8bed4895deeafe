package tlsconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/agentd/agentd/internal/secretfile"
)

// Files names the PEM files of a static identity.
type Files struct {
	Cert   string // the X.509 SVID: leaf first, then any intermediates (PEM)
	Key    string // its private key (PEM, PKCS#8)
	Bundle string // the trust bundle: CA certificates of this trust domain (PEM)
	// JWTBundle, if set, is a JWKS of this trust domain's JWT-SVID signing keys
	// (the SPIFFE bundle format); without it JWT-SVID bearer tokens are refused.
	JWTBundle string
	// CheckEvery bounds how often the files are checked for changes: at most
	// once per interval, on the next use. Default 1s.
	CheckEvery time.Duration
}

// FileSource is a Source read from static PEM files, re-read when any of them
// changes (size, modification time or inode: an atomic rename counts). A change
// that does not load (a key not yet matching its new certificate) keeps the
// previous identity in force and is retried on the next check. It is safe for
// concurrent use; create it with NewFileSource.
type FileSource struct {
	files Files
	log   *slog.Logger

	mu      sync.Mutex // guards everything below
	cur     fileIdentity
	stamps  map[string]fileStamp
	checked time.Time
	lastErr string
	closed  bool
}

var _ Source = (*FileSource)(nil)

type fileIdentity struct {
	svid   *x509svid.SVID
	bundle *x509bundle.Bundle
	jwt    *jwtbundle.Bundle
}

type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// NewFileSource loads the files once; an error names the file that failed.
func NewFileSource(files Files, log *slog.Logger) (*FileSource, error) {
	if files.Cert == "" || files.Key == "" || files.Bundle == "" {
		return nil, errors.New("tlsconfig: a static identity needs a certificate, a key and a bundle file")
	}
	if files.CheckEvery <= 0 {
		files.CheckEvery = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &FileSource{files: files, log: log}
	stamps := s.stat()
	id, err := loadFiles(files)
	if err != nil {
		return nil, err
	}
	s.cur, s.stamps, s.checked = id, stamps, time.Now()
	return s, nil
}

func (s *FileSource) paths() []string {
	p := []string{s.files.Cert, s.files.Key, s.files.Bundle}
	if s.files.JWTBundle != "" {
		p = append(p, s.files.JWTBundle)
	}
	return p
}

func (s *FileSource) stat() map[string]fileStamp {
	out := make(map[string]fileStamp)
	for _, p := range s.paths() {
		fi, err := os.Stat(p)
		if err != nil {
			continue // a missing file is a change; the load reports it
		}
		st := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.ino = sys.Ino
		}
		out[p] = st
	}
	return out
}

func loadFiles(f Files) (fileIdentity, error) {
	// The private key is a secret file: refused, as every one is, when its
	// group or others may open it.
	if err := secretfile.Check(f.Key); err != nil {
		return fileIdentity{}, fmt.Errorf("load %s: %w", f.Key, err)
	}
	svid, err := x509svid.Load(f.Cert, f.Key)
	if err != nil {
		return fileIdentity{}, fmt.Errorf("load %s and %s: %w", f.Cert, f.Key, err)
	}
	td := svid.ID.TrustDomain()
	bundle, err := x509bundle.Load(td, f.Bundle)
	if err != nil {
		return fileIdentity{}, fmt.Errorf("load bundle %s: %w", f.Bundle, err)
	}
	if bundle.Empty() {
		return fileIdentity{}, fmt.Errorf("load bundle %s: no certificates", f.Bundle)
	}
	id := fileIdentity{svid: svid, bundle: bundle}
	if f.JWTBundle != "" {
		jb, err := jwtbundle.Load(td, f.JWTBundle)
		if err != nil {
			return fileIdentity{}, fmt.Errorf("load jwt bundle %s: %w", f.JWTBundle, err)
		}
		id.jwt = jb
	}
	return id, nil
}

// current returns the identity in force, re-reading the files first when the
// check interval has passed and they changed.
func (s *FileSource) current() (fileIdentity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fileIdentity{}, errors.New("tlsconfig: file source closed")
	}
	if time.Since(s.checked) < s.files.CheckEvery {
		return s.cur, nil
	}
	s.checked = time.Now()
	stamps := s.stat()
	if sameStamps(stamps, s.stamps) {
		return s.cur, nil
	}
	id, err := loadFiles(s.files)
	if err != nil {
		if err.Error() != s.lastErr {
			s.log.Warn("tls files changed but do not load; keeping the previous identity", "err", err)
			s.lastErr = err.Error()
		}
		return s.cur, nil
	}
	s.cur, s.stamps, s.lastErr = id, stamps, ""
	leaf := id.svid.Certificates[0]
	s.log.Info("tls files reloaded", "spiffe_id", id.svid.ID.String(), "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	return id, nil
}

func sameStamps(a, b map[string]fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.size != w.size || !v.mtime.Equal(w.mtime) || v.ino != w.ino {
			return false
		}
	}
	return true
}

// Ready is true: the files were loaded when the source was made.
func (s *FileSource) Ready() bool { return true }

// GetX509SVID returns the SVID in force.
func (s *FileSource) GetX509SVID() (*x509svid.SVID, error) {
	id, err := s.current()
	if err != nil {
		return nil, err
	}
	return id.svid, nil
}

// GetX509BundleForTrustDomain returns the bundle file's certificates for this
// workload's own trust domain; no other trust domain has a bundle.
func (s *FileSource) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	id, err := s.current()
	if err != nil {
		return nil, err
	}
	return id.bundle.GetX509BundleForTrustDomain(td)
}

// GetJWTBundleForTrustDomain returns the JWT bundle file's keys for this
// workload's own trust domain.
func (s *FileSource) GetJWTBundleForTrustDomain(td spiffeid.TrustDomain) (*jwtbundle.Bundle, error) {
	id, err := s.current()
	if err != nil {
		return nil, err
	}
	if id.jwt == nil {
		return nil, errors.New("tlsconfig: no JWT bundle configured")
	}
	return id.jwt.GetJWTBundleForTrustDomain(td)
}

// Close makes later calls fail.
func (s *FileSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// BundleSource is an x509bundle.Source read from one PEM bundle file for one
// trust domain, re-read when it changes; a client that has no SVID of its own
// verifies servers with it. Safe for concurrent use.
type BundleSource struct {
	td   spiffeid.TrustDomain
	path string

	mu      sync.Mutex // guards bundle, checked
	bundle  *x509bundle.Bundle
	checked time.Time
}

// NewBundleSource loads the bundle file for td.
func NewBundleSource(td spiffeid.TrustDomain, path string) (*BundleSource, error) {
	b, err := x509bundle.Load(td, path)
	if err != nil {
		return nil, fmt.Errorf("load bundle %s: %w", path, err)
	}
	return &BundleSource{td: td, path: path, bundle: b, checked: time.Now()}, nil
}

// GetX509BundleForTrustDomain returns the bundle when td is its trust domain.
func (b *BundleSource) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.checked) >= time.Second {
		b.checked = time.Now()
		if nb, err := x509bundle.Load(b.td, b.path); err == nil {
			b.bundle = nb
		}
	}
	return b.bundle.GetX509BundleForTrustDomain(td)
}
