package tlsconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// WorkloadSource is a Source fed by the SPIFFE Workload API (a SPIRE agent's
// socket). It is created at once and connects in the background: Ready turns
// true with the first X.509 SVID, and every later rotation applies to the next
// TLS handshake without a restart. JWT bundles arrive on their own stream. It
// is safe for concurrent use; create it with NewWorkloadSource.
type WorkloadSource struct {
	log       *slog.Logger
	client    *workloadapi.Client
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu   sync.RWMutex // guards x509, jwt
	x509 *workloadapi.X509Source
	jwt  *workloadapi.JWTSource
}

var _ Source = (*WorkloadSource)(nil)

// WorkloadAddress normalizes a Workload API address: a bare absolute path
// becomes unix://PATH; unix:// and tcp:// URIs are checked as go-spiffe parses
// them.
func WorkloadAddress(addr string) (string, error) {
	if strings.HasPrefix(addr, "/") {
		addr = "unix://" + addr
	}
	if err := workloadapi.ValidateAddress(addr); err != nil {
		return "", fmt.Errorf("workload api address %q: %w", addr, err)
	}
	return addr, nil
}

// NewWorkloadSource starts watching the Workload API at addr (see
// WorkloadAddress). It does not wait for the first SVID: watch Ready, or use
// WaitReady. Close stops it.
func NewWorkloadSource(addr string, log *slog.Logger) (*WorkloadSource, error) {
	addr, err := WorkloadAddress(addr)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	client, err := workloadapi.New(ctx,
		workloadapi.WithAddr(addr),
		workloadapi.WithLogger(spiffeLogger{log}),
		workloadapi.WithBackoffStrategy(backoff{}),
	)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("workload api client: %w", err)
	}
	s := &WorkloadSource{log: log, client: client, cancel: cancel}
	s.wg.Add(2)
	go s.watchX509(ctx)
	go s.watchJWT(ctx)
	return s, nil
}

// watchX509 waits for the first X.509 context, then logs every rotation.
func (s *WorkloadSource) watchX509(ctx context.Context) {
	defer s.wg.Done()
	var src *workloadapi.X509Source
	for {
		var err error
		src, err = workloadapi.NewX509Source(ctx, workloadapi.WithClient(s.client))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("workload api: no X.509 SVID yet", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
	s.mu.Lock()
	s.x509 = src
	s.mu.Unlock()
	s.logSVID("workload api: X.509 SVID received", src)
	for {
		select {
		case <-ctx.Done():
			return
		case <-src.Updated():
			s.logSVID("workload api: X.509 SVID rotated", src)
		}
	}
}

func (s *WorkloadSource) logSVID(msg string, src *workloadapi.X509Source) {
	svid, err := src.GetX509SVID()
	if err != nil {
		s.log.Warn(msg, "err", err)
		return
	}
	leaf := svid.Certificates[0]
	s.log.Info(msg, "spiffe_id", svid.ID.String(), "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
}

func (s *WorkloadSource) watchJWT(ctx context.Context) {
	defer s.wg.Done()
	for {
		src, err := workloadapi.NewJWTSource(ctx, workloadapi.WithClient(s.client))
		if err == nil {
			s.mu.Lock()
			s.jwt = src
			s.mu.Unlock()
			s.log.Info("workload api: JWT bundles received")
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("workload api: no JWT bundles yet", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
}

// Ready reports whether the first X.509 SVID has arrived.
func (s *WorkloadSource) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.x509 != nil
}

// GetX509SVID returns the current X.509 SVID, or ErrNoSVID before the first.
func (s *WorkloadSource) GetX509SVID() (*x509svid.SVID, error) {
	s.mu.RLock()
	src := s.x509
	s.mu.RUnlock()
	if src == nil {
		return nil, ErrNoSVID
	}
	return src.GetX509SVID()
}

// GetX509BundleForTrustDomain returns the current X.509 bundle of td.
func (s *WorkloadSource) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	s.mu.RLock()
	src := s.x509
	s.mu.RUnlock()
	if src == nil {
		return nil, fmt.Errorf("tlsconfig: no X.509 bundle for %q yet", td)
	}
	return src.GetX509BundleForTrustDomain(td)
}

// GetJWTBundleForTrustDomain returns the current JWT bundle of td.
func (s *WorkloadSource) GetJWTBundleForTrustDomain(td spiffeid.TrustDomain) (*jwtbundle.Bundle, error) {
	s.mu.RLock()
	src := s.jwt
	s.mu.RUnlock()
	if src == nil {
		return nil, fmt.Errorf("tlsconfig: no JWT bundle for %q yet", td)
	}
	return src.GetJWTBundleForTrustDomain(td)
}

// Close stops watching and drops the connection. It is idempotent: later
// calls return the first call's error.
func (s *WorkloadSource) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.mu.Lock()
		x, j := s.x509, s.jwt
		s.x509, s.jwt = nil, nil
		s.mu.Unlock()
		var errs []error
		if x != nil {
			errs = append(errs, x.Close())
		}
		if j != nil {
			errs = append(errs, j.Close())
		}
		errs = append(errs, s.client.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff retries a broken Workload API stream after 200ms, doubling to 5s:
// a new SPIRE registration reaches the workload within seconds, not the
// default's up to 30.
type backoff struct{}

func (backoff) NewBackoff() workloadapi.Backoff { return &expBackoff{} }

type expBackoff struct{ next time.Duration }

func (b *expBackoff) Next() time.Duration {
	if b.next == 0 {
		b.next = 200 * time.Millisecond
	}
	d := b.next
	b.next = min(2*b.next, 5*time.Second)
	return d
}

func (b *expBackoff) Reset() { b.next = 0 }

// spiffeLogger adapts go-spiffe's logger to slog. The client's errors about a
// broken stream are retried, so they are warnings.
type spiffeLogger struct{ log *slog.Logger }

func (l spiffeLogger) Debugf(format string, args ...any) {
	l.log.Debug("workload api: " + fmt.Sprintf(format, args...))
}
func (l spiffeLogger) Infof(format string, args ...any) {
	l.log.Info("workload api: " + fmt.Sprintf(format, args...))
}
func (l spiffeLogger) Warnf(format string, args ...any) {
	l.log.Warn("workload api: " + fmt.Sprintf(format, args...))
}
func (l spiffeLogger) Errorf(format string, args ...any) {
	l.log.Warn("workload api: " + fmt.Sprintf(format, args...))
}
