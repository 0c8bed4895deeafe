package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
)

// The unary RPCs of the gRPC binding are served here, on the HTTP/2
// request itself, rather than through grpc.Server.ServeHTTP: that handler
// transport starts three goroutines per call (the body's reader, a context
// watcher, the RPC) and hands every write to the request's goroutine over a
// channel, flushing a frame at a time, which made a unary call over the
// front cost about twice what it does on grpc's own transport (figure 2 of
// docs/performance.md; BenchmarkGRPCSendMessage). A unary call is one
// length-prefixed message in and one out, so the request's goroutine reads
// it, runs the method's generated handler with the binding's interceptor
// (grpcUnary: the version, the malformed request, the A2A errors as gRPC
// statuses), and writes the answer, its status in the trailers, in one go.
// The streaming RPCs, and a call whose message is compressed, still go to
// the grpc.Server. Behind Split (split.go) this serves only the gRPC calls of
// an HTTP/2 connection that opened with another request; a gRPC client's
// connection goes to grpc's own transport, cheaper still.

// unaryRPC is the binding's unary method of one path, with the server it is
// called on.
type unaryRPC struct {
	desc grpc.MethodDesc
	srv  any
}

// grpcUnaryServer serves the unary RPCs of a service on HTTP/2 requests.
type grpcUnaryServer struct {
	methods map[string]unaryRPC // by path: /lf.a2a.v1.A2AService/SendMessage
	codec   encoding.CodecV2
	maxRecv int
}

// newGRPCUnary serves the unary methods of the A2A service on srv, refusing
// a message over maxRecv bytes as grpc.MaxRecvMsgSize does.
func newGRPCUnary(srv a2apb.A2AServiceServer, maxRecv int, reserve reserveFunc) *grpcUnaryServer {
	u := &grpcUnaryServer{methods: map[string]unaryRPC{}, codec: lenientCodec{encoding.GetCodecV2(protoCodecName), reserve}, maxRecv: maxRecv}
	sd := a2apb.A2AService_ServiceDesc
	for _, m := range sd.Methods {
		u.methods["/"+sd.ServiceName+"/"+m.MethodName] = unaryRPC{desc: m, srv: srv}
	}
	return u
}

// method returns the unary RPC r calls, false when r is not one this server
// serves itself (a streaming method, an unknown one, a compressed message).
func (u *grpcUnaryServer) method(r *http.Request) (unaryRPC, bool) {
	m, ok := u.methods[r.URL.Path]
	if !ok {
		return unaryRPC{}, false
	}
	if enc := r.Header.Get("Grpc-Encoding"); enc != "" && enc != "identity" {
		return unaryRPC{}, false
	}
	return m, true
}

// serve answers the unary call r: its request message read, m called with
// the metadata and deadline of r's headers, and the answer or the error
// written with its status.
func (u *grpcUnaryServer) serve(w http.ResponseWriter, r *http.Request, m unaryRPC) {
	ctx := r.Context()
	if v := r.Header.Get("Grpc-Timeout"); v != "" {
		d, err := grpcTimeout(v)
		if err != nil {
			grpcWriteStatus(w, status.New(codes.Internal, "malformed grpc-timeout: "+err.Error()))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	md, err := incomingMD(r)
	if err != nil {
		grpcWriteStatus(w, status.New(codes.Internal, err.Error()))
		return
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	buf := msgBufs.Get().(*[]byte)
	defer msgBufs.Put(buf) // the request is decoded (copied) before the handler returns
	msg, st := u.readMessage(r.Body, *buf)
	if st != nil {
		grpcWriteStatus(w, st)
		return
	}
	dec := func(v any) error { return u.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, v) }
	res, err := m.desc.Handler(m.srv, ctx, dec, grpcUnary)
	if err != nil {
		grpcWriteStatus(w, status.Convert(err))
		return
	}
	out, err := proto.Marshal(res.(proto.Message))
	if err != nil {
		grpcWriteStatus(w, status.New(codes.Internal, "grpc: error while marshaling: "+err.Error()))
		return
	}
	h := w.Header()
	h["Date"] = nil // as grpc's own transports: no Date
	h.Set("Content-Type", r.Header.Get("Content-Type"))
	frame := make([]byte, 5+len(out))
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(out)))
	copy(frame[5:], out)
	_, _ = w.Write(frame)
	h.Set(http.TrailerPrefix+"Grpc-Status", "0")
}

// readMessage reads the one length-prefixed message of a unary call's body:
// a message over maxRecv is RESOURCE_EXHAUSTED before it is read, a missing
// or cut one INTERNAL, as grpc's transport answers them. A small message is
// read in one Read (each Read of an HTTP/2 body wakes the connection's
// serve loop to credit the flow-control window), into buf when it fits.
func (u *grpcUnaryServer) readMessage(body io.Reader, buf []byte) ([]byte, *status.Status) {
	n, err := io.ReadAtLeast(body, buf, 5)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, status.New(codes.Internal, "grpc: the request has no message")
		}
		return nil, readStatus(err)
	}
	if buf[0] != 0 {
		return nil, status.New(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
	}
	size := binary.BigEndian.Uint32(buf[1:5])
	if int64(size) > int64(u.maxRecv) {
		return nil, status.Newf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", size, u.maxRecv)
	}
	if end := 5 + int(size); end <= n {
		return buf[5:end], nil
	}
	msg := make([]byte, size)
	got := copy(msg, buf[5:n])
	if _, err := io.ReadFull(body, msg[got:]); err != nil {
		return nil, readStatus(err)
	}
	return msg, nil
}

// msgBufs are readMessage's buffers: room for a message in one HTTP/2 DATA
// frame of the default size.
var msgBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// readStatus is the status of a body that could not be read.
func readStatus(err error) *status.Status {
	switch {
	case isTimeout(err):
		return status.New(codes.DeadlineExceeded, "the request was not received within the body deadline")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return status.New(codes.Internal, "grpc: the request message is cut short")
	}
	return status.New(codes.Canceled, "read the request: "+err.Error())
}

// grpcWriteStatus answers a call with st and no message: trailers-only,
// the status in the headers, as grpcRefuse does.
func grpcWriteStatus(w http.ResponseWriter, st *status.Status) {
	h := w.Header()
	h["Date"] = nil
	h.Set("Content-Type", GRPCContentType)
	h.Set("Grpc-Status", strconv.Itoa(int(st.Code())))
	if msg := st.Message(); msg != "" {
		h.Set("Grpc-Message", grpcMessage(msg))
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			h.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(b))
		}
	}
	w.WriteHeader(http.StatusOK)
}

// incomingMD is the metadata of a call: its headers, lowercase, but for the
// ones gRPC reserves (HTTP/2's, content-type, user-agent, te, grpc-*
// transport headers), the binary ones (-bin) base64-decoded.
func incomingMD(r *http.Request) (metadata.MD, error) {
	md := make(metadata.MD, len(r.Header)+2)
	md["content-type"] = []string{r.Header.Get("Content-Type")}
	if r.Host != "" {
		md[":authority"] = []string{r.Host}
	}
	for k, vs := range r.Header {
		k = strings.ToLower(k)
		switch k {
		case "content-type", "user-agent", "te", "grpc-message-type", "grpc-encoding", "grpc-message", "grpc-status", "grpc-timeout":
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				enc := base64.StdEncoding
				if len(v)%4 != 0 {
					enc = base64.RawStdEncoding
				}
				b, err := enc.DecodeString(v)
				if err != nil {
					return nil, fmt.Errorf("malformed binary metadata in header %q: %w", k, err)
				}
				v = string(b)
			}
			md[k] = append(md[k], v)
		}
	}
	return md, nil
}

// grpcTimeout decodes a grpc-timeout header: at most 8 digits and a unit
// (H, M, S, m, u, n).
func grpcTimeout(s string) (time.Duration, error) {
	if len(s) < 2 || len(s) > 9 {
		return 0, fmt.Errorf("timeout %q: want 1 to 8 digits and a unit", s)
	}
	units := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}
	unit, ok := units[s[len(s)-1]]
	if !ok {
		return 0, fmt.Errorf("timeout %q: unknown unit", s)
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timeout %q: %w", s, err)
	}
	if n > uint64(math.MaxInt64/int64(unit)) {
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(n) * unit, nil
}
