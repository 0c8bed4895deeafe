// Package a2agrpc is the A2A 1.0 gRPC binding: the conversions between its
// protobuf messages (a2apb, generated from agentd's a2a.proto) and a2av1's
// 1.0 data model, which the server's gRPC service uses, and Client, agentd's
// gRPC client of another agent, an a2acall.Transport.
package a2agrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/internal/bearer"
)

// The @types of the google.rpc details an A2A gRPC error carries.
const (
	ErrorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"
	RetryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
)

// Binding is the name of the gRPC binding in an agent card's
// supportedInterfaces.
const Binding = "GRPC"

// Target returns the gRPC target (host:port) of an agent at rawURL: the host
// and port of an http or https URL (80 or 443 when it names none; the path is
// not part of a gRPC address), or rawURL itself when it is already host:port.
// It returns "" for anything else.
func Target(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		if u.Port() != "" {
			return u.Host
		}
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	if host, port, err := net.SplitHostPort(rawURL); err == nil && host != "" && port != "" && !strings.Contains(rawURL, "/") {
		return rawURL
	}
	return ""
}

// Options configure a Client. The zero value speaks plaintext HTTP/2 (h2c,
// which agentd serves on loopback only), sends blocking SendMessage
// requests, and adds no credentials.
type Options struct {
	// TLS, if set, secures the connection (its NextProtos get h2); nil is
	// plaintext.
	TLS *tls.Config
	// Token, if set, gives the bearer token sent as the authorization
	// metadata of every call.
	Token func() (string, error)
	// NonBlocking makes SendMessage ask for an answer at once
	// (returnImmediately) unless the params say otherwise.
	NonBlocking bool
	// Header, if set, adds metadata to each call from its context (a
	// traceparent, say), as HTTP headers; names are lowercased.
	Header func(ctx context.Context, h http.Header)
	// Dial, if set, opens the connections (a dialer with the peer's
	// timeout, say).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// Flow-control windows of a Client's connections: a stream may receive
// StreamWindow bytes, a connection ConnWindow, before the client grants
// more (a WINDOW_UPDATE once a quarter is read); a larger answer still
// flows, a window at a time.
const (
	StreamWindow = 4 << 20  // a call's: a message of the default size limit in one flight
	ConnWindow   = 16 << 20 // the connection's: grpc's own bandwidth-delay limit
)

// WindowOptions are the dial options of a Client's fixed flow-control
// windows (StreamWindow, ConnWindow). With grpc-go's default, dynamic
// windows, the client probes the bandwidth-delay product after about every
// answer (a PING the server acks at once, and a WINDOW_UPDATE): one more
// write and read on each side a call. Fixed windows turn the probe off.
func WindowOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(StreamWindow), grpc.WithInitialConnWindowSize(ConnWindow)}
}

// Client calls one agent's A2A 1.0 gRPC service. It implements
// a2acall.Transport and answers in a2a-go's types; errors the agent answers
// are *Error, which wrap a2a-go's sentinels. It is safe for concurrent use;
// create it with New or NewFromHTTP and Close it when done. It connects on
// the first call, and again after a connection is lost.
type Client struct {
	conn *grpc.ClientConn
	stub a2apb.A2AServiceClient
	opts Options
}

var _ a2acall.Transport = (*Client)(nil)

// New returns a client of the agent at target (host:port, or an http or
// https URL whose host and port are taken; https needs opts.TLS, and http
// refuses it).
func New(target string, opts Options) (*Client, error) {
	addr := Target(target)
	if addr == "" {
		return nil, fmt.Errorf("a2agrpc: %q is neither host:port nor an http(s) URL", target)
	}
	u, _ := url.Parse(target)
	if u != nil && u.Scheme == "https" && opts.TLS == nil {
		return nil, fmt.Errorf("a2agrpc: %s: https needs a TLS config", target)
	}
	if u != nil && u.Scheme == "http" && opts.TLS != nil {
		return nil, fmt.Errorf("a2agrpc: %s: http is plaintext, yet a TLS config was given", target)
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS.Clone())
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(a2acall.MaxAnswer)),
	}, WindowOptions()...)
	if opts.Dial != nil {
		dopts = append(dopts, grpc.WithContextDialer(opts.Dial))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("a2agrpc: %s: %w", target, err)
	}
	return &Client{conn: conn, stub: a2apb.NewA2AServiceClient(conn), opts: opts}, nil
}

// NewFromHTTP returns a client of the agent at target over the transport
// security and credentials of hc, the http.Client agentd calls that peer's
// JSON-RPC endpoint with (peer.Clients builds it): the TLS config and dialer
// of its *http.Transport (an mTLS peer's client certificate and the SPIFFE ID
// it accepts), and the token of its *bearer.Transport, sent only when the
// target's host is that transport's (the port may differ: an agent may serve
// gRPC on a port of its own). A plain http target, or host:port with no TLS
// config in hc, is plaintext; an https one with no TLS config gets the system
// roots.
func NewFromHTTP(target string, hc *http.Client, opts Options) (*Client, error) {
	var rt http.RoundTripper
	if hc != nil {
		rt = hc.Transport
	}
	if bt, ok := rt.(*bearer.Transport); ok {
		addr := Target(target)
		host, _, _ := net.SplitHostPort(addr)
		if bt.Host == "" || hostOnly(bt.Host) == host {
			opts.Token = bt.Token
		}
		rt = bt.Base
	}
	u, _ := url.Parse(target)
	plain := u != nil && u.Scheme == "http"
	if tr, ok := rt.(*http.Transport); ok {
		if tr.TLSClientConfig != nil && !plain {
			opts.TLS = tr.TLSClientConfig
		}
		if tr.DialContext != nil {
			opts.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return tr.DialContext(ctx, "tcp", addr) }
		}
	}
	if opts.TLS == nil && u != nil && u.Scheme == "https" {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS13}
	}
	return New(target, opts)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// Close closes the client's connections. Calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// outgoing is ctx with the call's metadata: the protocol version, the
// bearer token, and what Options.Header adds.
func (c *Client) outgoing(ctx context.Context) (context.Context, error) {
	md := metadata.Pairs("a2a-version", a2av1.Version)
	if c.opts.Token != nil {
		tok, err := c.opts.Token()
		if err != nil {
			return nil, err
		}
		md.Set("authorization", "Bearer "+tok)
	}
	if c.opts.Header != nil {
		h := http.Header{}
		c.opts.Header(ctx, h)
		for k, vs := range h {
			md.Append(strings.ToLower(k), vs...)
		}
	}
	return metadata.NewOutgoingContext(ctx, md), nil
}

// SendMessage calls SendMessage and returns the task or the message the
// agent answered.
func (c *Client) SendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	req, err := c.sendRequest(p)
	if err != nil {
		return nil, err
	}
	ctx, err = c.outgoing(ctx)
	if err != nil {
		return nil, callError(a2av1.MethodSendMessage, err)
	}
	res, err := c.stub.SendMessage(ctx, req)
	if err != nil {
		return nil, callError(a2av1.MethodSendMessage, err)
	}
	switch v := res.GetPayload().(type) {
	case *a2apb.SendMessageResponse_Task:
		return answerTask(a2av1.MethodSendMessage, v.Task)
	case *a2apb.SendMessageResponse_Message:
		m, err := Message(v.Message)
		if err == nil {
			return message03(m)
		}
		return nil, fmt.Errorf("a2agrpc: %s: the answer: %w", a2av1.MethodSendMessage, err)
	}
	return nil, fmt.Errorf("a2agrpc: %s: the answer is neither a task nor a message", a2av1.MethodSendMessage)
}

// sendRequest is p as the 1.0 request: blocking unless p, or else
// Options.NonBlocking, says otherwise.
func (c *Client) sendRequest(p *a2a.MessageSendParams) (*a2apb.SendMessageRequest, error) {
	if p == nil || p.Message == nil {
		return nil, fmt.Errorf("a2agrpc: %s: a message is required: %w", a2av1.MethodSendMessage, a2a.ErrInvalidParams)
	}
	v1 := &a2av1.SendMessageRequest{Message: a2av1.MessageFrom(p.Message), Metadata: p.Metadata}
	cfg := &a2av1.SendMessageConfiguration{ReturnImmediately: c.opts.NonBlocking}
	if pc := p.Config; pc != nil {
		if pc.Blocking != nil {
			cfg.ReturnImmediately = !*pc.Blocking
		}
		cfg.AcceptedOutputModes = pc.AcceptedOutputModes
		cfg.HistoryLength = pc.HistoryLength
		if pc.PushConfig != nil {
			push := a2av1.PushConfigFrom(p.Message.TaskID, *pc.PushConfig)
			cfg.TaskPushNotificationConfig = &push
		}
	}
	v1.Configuration = cfg
	req, err := ToSendRequest(v1)
	if err != nil {
		return nil, fmt.Errorf("a2agrpc: %s: encode the request: %w", a2av1.MethodSendMessage, err)
	}
	return req, nil
}

// GetTask calls GetTask.
func (c *Client) GetTask(ctx context.Context, p *a2a.TaskQueryParams) (*a2a.Task, error) {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return nil, callError(a2av1.MethodGetTask, err)
	}
	req := &a2apb.GetTaskRequest{Id: string(p.ID)}
	if p.HistoryLength != nil {
		n := int32(*p.HistoryLength)
		req.HistoryLength = &n
	}
	t, err := c.stub.GetTask(ctx, req)
	if err != nil {
		return nil, callError(a2av1.MethodGetTask, err)
	}
	return answerTask(a2av1.MethodGetTask, t)
}

// CancelTask calls CancelTask and returns the task as the agent answered.
func (c *Client) CancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return nil, callError(a2av1.MethodCancelTask, err)
	}
	meta, err := toStruct(p.Metadata)
	if err != nil {
		return nil, fmt.Errorf("a2agrpc: %s: %w", a2av1.MethodCancelTask, err)
	}
	t, err := c.stub.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: string(p.ID), Metadata: meta})
	if err != nil {
		return nil, callError(a2av1.MethodCancelTask, err)
	}
	return answerTask(a2av1.MethodCancelTask, t)
}

// SendStreamingMessage calls SendStreamingMessage and yields the stream's
// events until it ends, an error (the last yield), or the caller stops
// (which ends the call).
func (c *Client) SendStreamingMessage(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		req, err := c.sendRequest(p)
		if err != nil {
			yield(nil, err)
			return
		}
		c.stream(ctx, a2av1.MethodSendStreamingMessage, func(ctx context.Context) (grpc.ServerStreamingClient[a2apb.StreamResponse], error) {
			return c.stub.SendStreamingMessage(ctx, req)
		}, yield)
	}
}

// ResubscribeToTask calls SubscribeToTask and yields the task's events as
// SendStreamingMessage does.
func (c *Client) ResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c.stream(ctx, a2av1.MethodSubscribeToTask, func(ctx context.Context) (grpc.ServerStreamingClient[a2apb.StreamResponse], error) {
			return c.stub.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: string(p.ID)})
		}, yield)
	}
}

func (c *Client) stream(ctx context.Context, method string, open func(context.Context) (grpc.ServerStreamingClient[a2apb.StreamResponse], error), yield func(a2a.Event, error) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a caller that stops early ends the call
	ctx, err := c.outgoing(ctx)
	if err != nil {
		yield(nil, callError(method, err))
		return
	}
	s, err := open(ctx)
	if err != nil {
		yield(nil, callError(method, err))
		return
	}
	for {
		msg, err := s.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			yield(nil, callError(method, err))
			return
		}
		v1, err := StreamResponse(msg)
		if err != nil {
			yield(nil, fmt.Errorf("a2agrpc: %s: an event: %w", method, err))
			return
		}
		ev, err := event03(v1)
		if err != nil {
			yield(nil, fmt.Errorf("a2agrpc: %s: an event: %w", method, err))
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// SetTaskPushConfig calls CreateTaskPushNotificationConfig.
func (c *Client) SetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return nil, callError(a2av1.MethodCreatePushConfig, err)
	}
	got, err := c.stub.CreateTaskPushNotificationConfig(ctx, ToPushConfig(a2av1.PushConfigFrom(p.TaskID, p.Config)))
	if err != nil {
		return nil, callError(a2av1.MethodCreatePushConfig, err)
	}
	return pushConfig03(a2av1.MethodCreatePushConfig, got)
}

// GetTaskPushConfig calls GetTaskPushNotificationConfig.
func (c *Client) GetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return nil, callError(a2av1.MethodGetPushConfig, err)
	}
	got, err := c.stub.GetTaskPushNotificationConfig(ctx, &a2apb.GetTaskPushNotificationConfigRequest{TaskId: string(p.TaskID), Id: p.ConfigID})
	if err != nil {
		return nil, callError(a2av1.MethodGetPushConfig, err)
	}
	return pushConfig03(a2av1.MethodGetPushConfig, got)
}

// ListTaskPushConfig calls ListTaskPushNotificationConfigs.
func (c *Client) ListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return nil, callError(a2av1.MethodListPushConfigs, err)
	}
	got, err := c.stub.ListTaskPushNotificationConfigs(ctx, &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: string(p.TaskID)})
	if err != nil {
		return nil, callError(a2av1.MethodListPushConfigs, err)
	}
	out := make([]*a2a.TaskPushConfig, 0, len(got.GetConfigs()))
	for _, pc := range got.GetConfigs() {
		v, err := pushConfig03(a2av1.MethodListPushConfigs, pc)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteTaskPushConfig calls DeleteTaskPushNotificationConfig.
func (c *Client) DeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	ctx, err := c.outgoing(ctx)
	if err != nil {
		return callError(a2av1.MethodDeletePushConfig, err)
	}
	if _, err := c.stub.DeleteTaskPushNotificationConfig(ctx, &a2apb.DeleteTaskPushNotificationConfigRequest{TaskId: string(p.TaskID), Id: p.ConfigID}); err != nil {
		return callError(a2av1.MethodDeletePushConfig, err)
	}
	return nil
}

// Error is an error status the agent (or the gRPC runtime) answered. It
// wraps a2a-go's sentinel for its A2A error: by the reason of its
// google.rpc.ErrorInfo in the A2A domain when it has one, else by its code
// (NOT_FOUND a2a.ErrTaskNotFound, INVALID_ARGUMENT a2a.ErrInvalidParams,
// UNIMPLEMENTED a2a.ErrMethodNotFound, INTERNAL a2a.ErrInternalError,
// UNAVAILABLE and RESOURCE_EXHAUSTED a2a.ErrServerError); a cancelled or
// expired call wraps the context's error.
type Error struct {
	Method  string
	Code    codes.Code
	Message string
	// Reason and Domain are the ErrorInfo's, if the status has one;
	// Metadata its metadata.
	Reason, Domain string
	Metadata       map[string]string
	// RetryAfter is the RetryInfo's delay (a request shed for load), 0 if
	// none.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("a2agrpc: %s: %s: %s", e.Method, e.Code, e.Message)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// reasonErrors are the ErrorInfo reasons of A2A 1.0's errors and a2a-go's
// sentinels for them.
var reasonErrors = map[string]error{
	"TASK_NOT_FOUND":                     a2a.ErrTaskNotFound,
	"TASK_NOT_CANCELABLE":                a2a.ErrTaskNotCancelable,
	"PUSH_NOTIFICATION_NOT_SUPPORTED":    a2a.ErrPushNotificationNotSupported,
	"UNSUPPORTED_OPERATION":              a2a.ErrUnsupportedOperation,
	"CONTENT_TYPE_NOT_SUPPORTED":         a2a.ErrUnsupportedContentType,
	"INVALID_AGENT_RESPONSE":             a2a.ErrInvalidAgentResponse,
	"EXTENDED_AGENT_CARD_NOT_CONFIGURED": a2a.ErrAuthenticatedExtendedCardNotConfigured,
	"INVALID_PARAMS":                     a2a.ErrInvalidParams,
	"INVALID_REQUEST":                    a2a.ErrInvalidRequest,
	"METHOD_NOT_FOUND":                   a2a.ErrMethodNotFound,
	"PARSE_ERROR":                        a2a.ErrParseError,
	"INTERNAL":                           a2a.ErrInternalError,
	"RESOURCE_EXHAUSTED":                 a2a.ErrServerError,
}

var codeErrors = map[codes.Code]error{
	codes.NotFound:          a2a.ErrTaskNotFound,
	codes.InvalidArgument:   a2a.ErrInvalidParams,
	codes.Unimplemented:     a2a.ErrMethodNotFound,
	codes.Internal:          a2a.ErrInternalError,
	codes.Unavailable:       a2a.ErrServerError,
	codes.ResourceExhausted: a2a.ErrServerError,
	codes.Canceled:          context.Canceled,
	codes.DeadlineExceeded:  context.DeadlineExceeded,
}

// Unwrap returns a2a-go's sentinel for the error, or nil.
func (e *Error) Unwrap() error {
	if e.Reason != "" && (e.Domain == a2av1.ErrorDomain || e.Reason == "RESOURCE_EXHAUSTED") {
		if err, ok := reasonErrors[e.Reason]; ok {
			return err
		}
		return nil // VERSION_NOT_SUPPORTED and others without a 0.3 sentinel
	}
	return codeErrors[e.Code]
}

// StatusError is the error of a call to method that failed with err: an
// *Error when err is a gRPC status (as a raw stub's call answers), else err
// wrapped.
func StatusError(method string, err error) error { return callError(method, err) }

// callError is err of a call as an *Error when it is a status.
func callError(method string, err error) error {
	st, ok := grpcstatus.FromError(err)
	if !ok {
		return fmt.Errorf("a2agrpc: %s: %w", method, err)
	}
	e := &Error{Method: method, Code: st.Code(), Message: st.Message()}
	for _, d := range st.Proto().GetDetails() {
		switch d.GetTypeUrl() {
		case ErrorInfoType:
			if e.Reason == "" {
				e.Reason, e.Domain, e.Metadata = decodeErrorInfo(d.GetValue())
			}
		case RetryInfoType:
			e.RetryAfter = decodeRetryInfo(d.GetValue())
		}
	}
	return e
}

// decodeErrorInfo reads google.rpc.ErrorInfo (reason 1, domain 2, metadata
// 3); what does not parse is left out.
func decodeErrorInfo(b []byte) (reason, domain string, meta map[string]string) {
	eachField(b, func(num protowire.Number, v []byte) {
		switch num {
		case 1:
			reason = string(v)
		case 2:
			domain = string(v)
		case 3:
			var k, val string
			eachField(v, func(n protowire.Number, x []byte) {
				if n == 1 {
					k = string(x)
				} else if n == 2 {
					val = string(x)
				}
			})
			if meta == nil {
				meta = map[string]string{}
			}
			meta[k] = val
		}
	})
	return reason, domain, meta
}

// decodeRetryInfo reads google.rpc.RetryInfo's retry_delay (1), a
// google.protobuf.Duration (seconds 1, nanos 2).
func decodeRetryInfo(b []byte) time.Duration {
	var d time.Duration
	eachField(b, func(num protowire.Number, v []byte) {
		if num != 1 {
			return
		}
		for len(v) > 0 {
			n, typ, m := protowire.ConsumeTag(v)
			if m < 0 {
				return
			}
			v = v[m:]
			if typ != protowire.VarintType {
				if m = protowire.ConsumeFieldValue(n, typ, v); m < 0 {
					return
				}
				v = v[m:]
				continue
			}
			x, m := protowire.ConsumeVarint(v)
			if m < 0 {
				return
			}
			v = v[m:]
			switch n {
			case 1:
				d += time.Duration(int64(x)) * time.Second
			case 2:
				d += time.Duration(int32(x))
			}
		}
	})
	return d
}

// eachField calls fn with each length-delimited field of b.
func eachField(b []byte, fn func(protowire.Number, []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return
		}
		fn(num, v)
		b = b[n:]
	}
}

// ErrBadAnswer marks an answer that does not convert to a2a-go's types.
var ErrBadAnswer = errors.New("a2agrpc: the answer does not convert")
