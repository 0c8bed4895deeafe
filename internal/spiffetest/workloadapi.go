package spiffetest

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	"github.com/spiffe/go-spiffe/v2/svid/jwtsvid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// WorkloadAPI is a fake SPIFFE Workload API serving one workload identity over
// a unix socket. Streams block until an identity is set, and every SetX509 or
// SetJWTAuthority is pushed to the open streams at once, as a SPIRE agent
// pushes a rotation. Safe for concurrent use.
type WorkloadAPI struct {
	workload.UnimplementedSpiffeWorkloadAPIServer

	// Addr is the address for clients: unix://PATH.
	Addr string
	path string
	srv  *grpc.Server
	done chan struct{}

	mu      sync.Mutex // guards svid, bundle, jwt, changed
	svid    *x509svid.SVID
	bundle  *x509bundle.Bundle
	jwt     *JWTAuthority
	changed chan struct{} // closed and replaced on every change
	fetches int
}

// StartWorkloadAPI serves the fake API on a new unix socket at path.
func StartWorkloadAPI(path string) (*WorkloadAPI, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("workload api listen: %w", err)
	}
	w := &WorkloadAPI{Addr: "unix://" + path, path: path, srv: grpc.NewServer(), changed: make(chan struct{}), done: make(chan struct{})}
	workload.RegisterSpiffeWorkloadAPIServer(w.srv, w)
	go func() {
		defer close(w.done)
		_ = w.srv.Serve(ln)
	}()
	return w, nil
}

// Close stops the server and removes the socket.
func (w *WorkloadAPI) Close() {
	w.srv.Stop()
	<-w.done
	_ = os.Remove(w.path)
}

// SetX509 sets the workload's X.509 SVID and its trust domain's bundle.
func (w *WorkloadAPI) SetX509(svid *x509svid.SVID, bundle *x509bundle.Bundle) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svid, w.bundle = svid, bundle
	w.changedLocked()
}

// SetJWTAuthority sets the key that signs JWT-SVIDs and forms the JWT bundle.
func (w *WorkloadAPI) SetJWTAuthority(a *JWTAuthority) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.jwt = a
	w.changedLocked()
}

// X509Fetches counts the X.509 streams opened so far.
func (w *WorkloadAPI) X509Fetches() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fetches
}

func (w *WorkloadAPI) changedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// checkHeader enforces the Workload API's security header, as SPIRE does.
func checkHeader(ctx context.Context) error {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md.Get("workload.spiffe.io")) != 1 || md.Get("workload.spiffe.io")[0] != "true" {
		return status.Error(codes.InvalidArgument, "security header missing from request")
	}
	return nil
}

// FetchX509SVID streams the identity, now and after every change.
func (w *WorkloadAPI) FetchX509SVID(_ *workload.X509SVIDRequest, stream grpc.ServerStreamingServer[workload.X509SVIDResponse]) error {
	if err := checkHeader(stream.Context()); err != nil {
		return err
	}
	w.mu.Lock()
	w.fetches++
	w.mu.Unlock()
	for {
		w.mu.Lock()
		svid, bundle, changed := w.svid, w.bundle, w.changed
		w.mu.Unlock()
		if svid != nil {
			resp, err := x509Response(svid, bundle)
			if err != nil {
				return status.Error(codes.Internal, err.Error())
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

func x509Response(svid *x509svid.SVID, bundle *x509bundle.Bundle) (*workload.X509SVIDResponse, error) {
	var chain []byte
	for _, c := range svid.Certificates {
		chain = append(chain, c.Raw...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(svid.PrivateKey)
	if err != nil {
		return nil, err
	}
	return &workload.X509SVIDResponse{Svids: []*workload.X509SVID{{
		SpiffeId:    svid.ID.String(),
		X509Svid:    chain,
		X509SvidKey: key,
		Bundle:      bundleDER(bundle),
	}}}, nil
}

func bundleDER(b *x509bundle.Bundle) []byte {
	var der []byte
	for _, c := range b.X509Authorities() {
		der = append(der, c.Raw...)
	}
	return der
}

// FetchX509Bundles streams the trust bundle.
func (w *WorkloadAPI) FetchX509Bundles(_ *workload.X509BundlesRequest, stream grpc.ServerStreamingServer[workload.X509BundlesResponse]) error {
	if err := checkHeader(stream.Context()); err != nil {
		return err
	}
	for {
		w.mu.Lock()
		bundle, changed := w.bundle, w.changed
		w.mu.Unlock()
		if bundle != nil {
			if err := stream.Send(&workload.X509BundlesResponse{Bundles: map[string][]byte{bundle.TrustDomain().IDString(): bundleDER(bundle)}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// FetchJWTSVID mints a JWT-SVID for the workload's SPIFFE ID.
func (w *WorkloadAPI) FetchJWTSVID(ctx context.Context, req *workload.JWTSVIDRequest) (*workload.JWTSVIDResponse, error) {
	if err := checkHeader(ctx); err != nil {
		return nil, err
	}
	w.mu.Lock()
	svid, a := w.svid, w.jwt
	w.mu.Unlock()
	if svid == nil || a == nil {
		return nil, status.Error(codes.PermissionDenied, "no identity issued")
	}
	if len(req.Audience) == 0 {
		return nil, status.Error(codes.InvalidArgument, "audience must be specified")
	}
	tok, err := a.Mint(svid.ID, req.Audience, time.Now().Add(5*time.Minute))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &workload.JWTSVIDResponse{Svids: []*workload.JWTSVID{{SpiffeId: svid.ID.String(), Svid: tok}}}, nil
}

// FetchJWTBundles streams the JWT bundle.
func (w *WorkloadAPI) FetchJWTBundles(_ *workload.JWTBundlesRequest, stream grpc.ServerStreamingServer[workload.JWTBundlesResponse]) error {
	if err := checkHeader(stream.Context()); err != nil {
		return err
	}
	for {
		w.mu.Lock()
		a, changed := w.jwt, w.changed
		w.mu.Unlock()
		if a != nil {
			jwks, err := a.Bundle().Marshal()
			if err != nil {
				return status.Error(codes.Internal, err.Error())
			}
			if err := stream.Send(&workload.JWTBundlesResponse{Bundles: map[string][]byte{a.TrustDomain.IDString(): jwks}}); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// ValidateJWTSVID validates a token against the JWT bundle.
func (w *WorkloadAPI) ValidateJWTSVID(ctx context.Context, req *workload.ValidateJWTSVIDRequest) (*workload.ValidateJWTSVIDResponse, error) {
	if err := checkHeader(ctx); err != nil {
		return nil, err
	}
	w.mu.Lock()
	a := w.jwt
	w.mu.Unlock()
	if a == nil {
		return nil, status.Error(codes.InvalidArgument, errors.New("no JWT bundle").Error())
	}
	s, err := jwtsvid.ParseAndValidate(req.Svid, a.Bundle(), []string{req.Audience})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &workload.ValidateJWTSVIDResponse{SpiffeId: s.ID.String()}, nil
}
