package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2agrpc/a2apb"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/loopback"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/tlsconfig"
)

// The gRPC binding of A2A 1.0 (service lf.a2a.v1.A2AService), served on the
// main listener beside JSON-RPC: a request over HTTP/2 whose Content-Type is
// application/grpc is served on it, a unary RPC by grpcUnaryServer
// (grpcunary.go), a streaming one by a grpc.Server through its ServeHTTP, so
// it shares the listener's TLS (ALPN h2), connection budgets and body
// deadline. On agentd's listener that path serves only a gRPC call on an
// HTTP/2 connection that opened with another request: Split (split.go)
// sends a connection whose first request is gRPC to GRPCServer, on grpc's
// own transport, with the same admission in its interceptors. Every
// RPC is the JSON-RPC 1.0 method of the same name: the request becomes the
// same a2av1 value (a2agrpc), meets the same checks (the message size limit,
// the reserved metadata), reaches the same RequestHandler, and its errors are
// the same A2A errors, as gRPC status codes (A2A 1.0 §5.4) with a
// google.rpc.ErrorInfo detail (§10.6), and a RetryInfo when the request was
// shed (RESOURCE_EXHAUSTED). The caller is authenticated as on every other
// route, from the same TLS connection and the authorization metadata (the
// Authorization header).

// GRPCContentType is the media type of a gRPC request; requests whose
// Content-Type starts with it are served by the gRPC binding.
const GRPCContentType = "application/grpc"

// isGRPC reports whether r is a gRPC call: HTTP/2 and a gRPC media type
// (application/grpc, application/grpc+proto...).
func isGRPC(r *http.Request) bool {
	if r.ProtoMajor != 2 || r.Method != http.MethodPost {
		return false
	}
	ct := r.Header.Get("Content-Type")
	return ct == GRPCContentType || strings.HasPrefix(ct, GRPCContentType+"+") || strings.HasPrefix(ct, GRPCContentType+";")
}

// newGRPC returns the gRPC server of the binding over h: a received message
// over BodyLimit(maxMessage) is refused (RESOURCE_EXHAUSTED) before it is
// decoded, as a JSON-RPC body over that size is with 413.
//
// With front set (the server of Split's gRPC connections), its interceptors
// admit each call first, as grpcHTTP does over net/http.
//
// With reserve set (Config.ReserveMessage), a request message is reserved
// for before it is decoded (lenientCodec).
func newGRPC(h a2asrv.RequestHandler, maxMessage int, front *grpcGate, reserve reserveFunc, opts ...grpc.ServerOption) *grpc.Server {
	unary := grpc.UnaryServerInterceptor(grpcUnary)
	stream := []grpc.StreamServerInterceptor{grpcStream}
	if front != nil {
		unary = front.unary // which calls grpcUnary itself: no chain a call
		stream = append([]grpc.StreamServerInterceptor{front.stream}, stream...)
	}
	s := grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(BodyLimit(maxMessage))),
		grpc.ForceServerCodecV2(lenientCodec{encoding.GetCodecV2(protoCodecName), reserve}),
		grpc.UnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream...),
	}, opts...)...)
	a2apb.RegisterA2AServiceServer(s, &grpcService{h: h, maxMessage: maxMessage})
	return s
}

// grpcCodeKey carries the JSON-RPC code of an answer from the RPC to the HTTP
// wrapper, which counts it (telemetry.NoteRPCCode) as for JSON-RPC.
type grpcCodeKey struct{}

// grpcVersion checks the a2a-version metadata: absent or 1.0 (a patch number
// ignored) is served; any other version is VersionNotSupported.
func grpcVersion(ctx context.Context) (context.Context, error) {
	// Only the one key: FromIncomingContext would copy every key and value.
	if vs := metadata.ValueFromIncomingContext(ctx, strings.ToLower(VersionHeader)); len(vs) > 0 {
		h := http.Header{}
		h.Set(VersionHeader, vs[0])
		v, err := requestVersion(h)
		if err == nil && v != a2av1.Version {
			err = fmt.Errorf("A2A-Version %s: the gRPC binding serves A2A %s only", vs[0], a2av1.Version)
		}
		if err != nil {
			return ctx, &RPCError{Code: CodeVersionNotSupported, Message: "version not supported", Data: map[string]any{"detail": err.Error()}}
		}
	}
	return tasks.WithVersion(ctx, a2av1.Version), nil
}

func grpcUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	release, err := takeReservation(req)
	defer release()
	if err != nil {
		return nil, grpcError(ctx, err)
	}
	ctx, err = grpcVersion(ctx)
	if err == nil {
		err = malformed(req)
	}
	var res any
	if err == nil {
		res, err = handler(ctx, req)
	}
	if err != nil {
		return nil, grpcError(ctx, err)
	}
	noteGRPCCode(ctx, 0)
	return res, nil
}

func grpcStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := grpcVersion(ss.Context())
	if err == nil {
		vs := &versionedStream{ServerStream: ss, ctx: ctx}
		err = handler(srv, vs)
		if vs.release != nil {
			vs.release()
		}
	}
	if err != nil {
		return grpcError(ctx, err)
	}
	noteGRPCCode(ctx, 0)
	return nil
}

// versionedStream is a server stream whose context is marked with the
// protocol version.
type versionedStream struct {
	grpc.ServerStream
	ctx     context.Context
	release func() // the request's memory reservation, given back when the call ends
}

func (s *versionedStream) Context() context.Context { return s.ctx }

// RecvMsg receives the request, refusing one that did not decode.
func (s *versionedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	release, err := takeReservation(m)
	if s.release == nil {
		s.release = release
	} else {
		defer release()
	}
	if err != nil {
		return err
	}
	return malformed(m)
}

// protoCodecName is the name of gRPC's protobuf codec.
const protoCodecName = "proto"

// malformedField is the field number lenientCodec marks a request that did
// not decode with: the last one protobuf allows, which A2A's messages do not
// use.
const malformedField = protowire.MaxValidNumber

// lenientCodec is gRPC's protobuf codec, except that a request that does not
// decode is not an error of the codec, which the gRPC runtime would answer
// INTERNAL as if the server had failed: the message is left empty, marked
// with the decoding error in an unknown field (malformedField), and the
// interceptors answer it INVALID_ARGUMENT (malformed).
//
// With reserve set, a request message of admit.MessageReserveMin bytes or
// more is first reserved for (the memory gate: what decoding and storing it
// may cost), as the JSON-RPC and HTTP+JSON bodies are before they are read:
// one the gate has no room for is not decoded, and the interceptors answer
// it RESOURCE_EXHAUSTED with its RetryInfo (reason memory); an admitted
// one's reservation is given back when its call ends (takeReservation).
type lenientCodec struct {
	encoding.CodecV2
	reserve reserveFunc
}

// reserveFunc is Config.ReserveMessage.
type reserveFunc = func(n int64) (release func(), err error)

// reservation is a decoded request's memory reservation, or why it was shed.
type reservation struct {
	release func()
	err     error
}

// reservations holds the reservations of the requests decoded and not yet
// taken by their call's interceptor, by the request message.
var reservations sync.Map

// takeReservation returns the reservation lenientCodec made for the request
// m (a no-op release when none), or the error that shed it.
func takeReservation(m any) (release func(), err error) {
	if v, ok := reservations.LoadAndDelete(m); ok {
		r := v.(reservation)
		if r.err != nil {
			return func() {}, r.err
		}
		return r.release, nil
	}
	return func() {}, nil
}

// dropReservation gives back a reservation no interceptor took (the call was
// refused before it reached one).
func dropReservation(m any) {
	if release, err := takeReservation(m); err == nil {
		release()
	}
}

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if n := data.Len(); c.reserve != nil && n >= admit.MessageReserveMin {
		if m, ok := v.(proto.Message); ok {
			release, err := c.reserve(int64(n))
			if err != nil {
				proto.Reset(m) // not decoded: the interceptor answers the shed
				reservations.Store(m, reservation{err: err})
				return nil
			}
			reservations.Store(m, reservation{release: release})
		}
	}
	err := c.CodecV2.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	mark := protowire.AppendTag(nil, malformedField, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendString(mark, err.Error()))
	return nil
}

// malformed returns the invalid-params error of a request lenientCodec
// marked, nil for any other.
func malformed(v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return nil
	}
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil
		}
		if num == malformedField && typ == protowire.BytesType {
			_, _, tagLen := protowire.ConsumeTag(b)
			msg, _ := protowire.ConsumeString(b[tagLen:])
			return invalidParams(fmt.Errorf("the request is not a valid protobuf %s: %s", m.ProtoReflect().Descriptor().FullName(), msg))
		}
		b = b[n:]
	}
	return nil
}

func noteGRPCCode(ctx context.Context, code int) {
	if p, ok := ctx.Value(grpcCodeKey{}).(*atomic.Int64); ok {
		p.Store(int64(code))
	}
}

// grpcCodes maps the JSON-RPC codes of A2A's errors to gRPC's (A2A 1.0
// §5.4; JSON-RPC's own as §3.3.2's generic errors).
var grpcCodes = map[int]codes.Code{
	CodeParseError:          codes.InvalidArgument,
	CodeInvalidRequest:      codes.InvalidArgument,
	CodeInvalidParams:       codes.InvalidArgument,
	CodeMethodNotFound:      codes.Unimplemented,
	CodeInternalError:       codes.Internal,
	CodeTaskNotFound:        codes.NotFound,
	CodeTaskNotCancel:       codes.FailedPrecondition,
	CodePushNotSupported:    codes.Unimplemented,
	CodeUnsupportedOp:       codes.Unimplemented,
	CodeContentType:         codes.InvalidArgument,
	CodeInvalidResponse:     codes.Internal,
	CodeNoExtendedCard:      codes.FailedPrecondition,
	-32008:                  codes.FailedPrecondition, // ExtensionSupportRequiredError
	CodeVersionNotSupported: codes.Unimplemented,
}

// grpcError is err as a gRPC status: the code of its A2A error, the message,
// and the details the 1.0 JSON-RPC error carries in its data (ErrorInfo,
// RetryInfo) as google.rpc messages.
func grpcError(ctx context.Context, err error) error {
	if _, ok := status.FromError(err); ok {
		return err // the gRPC runtime's own (a message that did not decode)
	}
	if errors.Is(err, a2av1.ErrInvalid) {
		err = invalidParams(err)
	}
	re := toRPCError(err)
	noteGRPCCode(ctx, re.Code)
	code, ok := grpcCodes[re.Code]
	switch {
	case re.retryAfter > 0, errors.Is(err, tasks.ErrStoreFull), errors.Is(err, tasks.ErrCallerQuota):
		code = codes.ResourceExhausted
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case re.Code == CodeServerError: // draining, the store unavailable
		code = codes.Unavailable
	case !ok:
		code = codes.Unknown
	}
	msg := re.Message
	if d := re.detail(); d != "" && !strings.Contains(msg, d) {
		msg += ": " + d
	}
	st := &spb.Status{Code: int32(code), Message: msg}
	for _, d := range asV1(re).Data.([]any) {
		if a := detailAny(d); a != nil {
			st.Details = append(st.Details, a)
		}
	}
	if n, ok := storeRetry(re); ok && len(st.Details) > 0 {
		st.Details = append(st.Details, retryInfo(n))
	}
	return status.FromProto(st).Err()
}

// storeRetry is the retry hint of an error that carries one in its 0.3 data
// (the task store unavailable) but is not a shed.
func storeRetry(re *RPCError) (int, bool) {
	if re.retryAfter > 0 {
		return 0, false // a shed's RetryInfo is in its 1.0 data already
	}
	m, ok := re.Data.(map[string]any)
	if !ok {
		return 0, false
	}
	n, ok := m["retryAfterSeconds"].(int)
	return n, ok && n > 0
}

// detailAny encodes one detail of a 1.0 error's data as the google.rpc
// message of its @type, nil for any other value. They are encoded field by
// field (google.rpc.ErrorInfo: reason 1, domain 2, metadata 3;
// google.rpc.RetryInfo: retry_delay 1, a Duration), so genproto's
// errdetails package, and its registration in every process, is not linked.
func detailAny(d any) *anypb.Any {
	switch v := d.(type) {
	case a2av1.ErrorInfo:
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, v.Reason)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v.Domain)
		for k, val := range v.Metadata {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, k)
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendString(e, val)
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			b = protowire.AppendBytes(b, e)
		}
		return &anypb.Any{TypeUrl: a2agrpc.ErrorInfoType, Value: b}
	case a2av1.RetryInfo:
		n, err := strconv.Atoi(strings.TrimSuffix(v.RetryDelay, "s"))
		if err != nil {
			return nil
		}
		return retryInfo(n)
	}
	return nil
}

func retryInfo(seconds int) *anypb.Any {
	var dur []byte
	dur = protowire.AppendTag(dur, 1, protowire.VarintType)
	dur = protowire.AppendVarint(dur, uint64(seconds))
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, dur)
	return &anypb.Any{TypeUrl: a2agrpc.RetryInfoType, Value: b}
}

// grpcService implements the A2A 1.0 service over a RequestHandler. Safe for
// concurrent use.
type grpcService struct {
	a2apb.UnimplementedA2AServiceServer
	h          a2asrv.RequestHandler
	maxMessage int
}

// sendParams converts and admits a send: what the JSON-RPC path does with
// SendMessage's params (SendParamsTo, then admitMessage).
func (g *grpcService) sendParams(req *a2apb.SendMessageRequest) (*a2a.MessageSendParams, error) {
	v1, err := a2agrpc.SendRequest(req)
	if err != nil {
		return nil, err
	}
	p, err := a2av1.SendParamsTo(v1)
	if err != nil {
		return nil, err
	}
	return p, g.admit(p, proto.Size(req))
}

// admit is rpcHandler.admitMessage for a send that came over gRPC: the
// reserved metadata removed, a message over the size limit (encoded as
// encoding/json writes it, as for JSON-RPC) refused. wireSize, the protobuf
// request's size, decides whether the message is worth measuring, as the
// JSON params' size does there: the protobuf encoding of a message is never
// more than maxExpansion times smaller than encoding/json's.
func (g *grpcService) admit(p *a2a.MessageSendParams, wireSize int) error {
	p.Metadata = stripReserved(p.Metadata)
	if p.Message == nil {
		return nil
	}
	p.Message.Metadata = stripReserved(p.Message.Metadata)
	if wireSize <= g.maxMessage/maxExpansion {
		return nil
	}
	b, err := json.Marshal(p.Message)
	if err != nil {
		return invalidParams(fmt.Errorf("message does not encode: %w", err))
	}
	if len(b) > g.maxMessage {
		return errMessageTooLarge(len(b), g.maxMessage)
	}
	return nil
}

func (g *grpcService) SendMessage(ctx context.Context, req *a2apb.SendMessageRequest) (*a2apb.SendMessageResponse, error) {
	p, err := g.sendParams(req)
	if err != nil {
		return nil, err
	}
	res, err := sendMessage(g.h, ctx, p)
	if err != nil {
		return nil, err
	}
	out := res.(a2av1.SendMessageResponse)
	if out.Task != nil {
		t, err := a2agrpc.ToTask(out.Task)
		return &a2apb.SendMessageResponse{Payload: &a2apb.SendMessageResponse_Task{Task: t}}, err
	}
	m, err := a2agrpc.ToMessage(out.Message)
	return &a2apb.SendMessageResponse{Payload: &a2apb.SendMessageResponse_Message{Message: m}}, err
}

func (g *grpcService) SendStreamingMessage(req *a2apb.SendMessageRequest, ss grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	p, err := g.sendParams(req)
	if err != nil {
		return err
	}
	return sendEvents(ss, g.h.OnSendMessageStream(ss.Context(), p))
}

func (g *grpcService) SubscribeToTask(req *a2apb.SubscribeToTaskRequest, ss grpc.ServerStreamingServer[a2apb.StreamResponse]) error {
	p, err := subscribeParams(&a2av1.SubscribeToTaskRequest{Tenant: req.GetTenant(), ID: req.GetId()})
	if err != nil {
		return err
	}
	return sendEvents(ss, subscribe(g.h, ss.Context(), p))
}

// sendEvents sends each event of a stream until it ends, fails (the RPC's
// error) or the client goes (Send fails; leaving the loop stops the
// handler's iterator).
func sendEvents(ss grpc.ServerStreamingServer[a2apb.StreamResponse], events iter.Seq2[a2a.Event, error]) error {
	for ev, err := range events {
		if err != nil {
			return err
		}
		out, err := a2agrpc.ToStreamResponse(a2av1.EventFrom(ev))
		if err != nil {
			return fmt.Errorf("an event does not encode: %w: %w", err, a2a.ErrInternalError)
		}
		if err := ss.Send(out); err != nil {
			return err
		}
	}
	return nil
}

func (g *grpcService) GetTask(ctx context.Context, req *a2apb.GetTaskRequest) (*a2apb.Task, error) {
	q, err := getTaskParams(&a2av1.GetTaskRequest{Tenant: req.GetTenant(), ID: req.GetId(), HistoryLength: optInt(req.HistoryLength)})
	if err != nil {
		return nil, err
	}
	if q.HistoryLength != nil && *q.HistoryLength < 0 {
		return nil, errRequired("historyLength must not be negative")
	}
	return pbTask(getTask(g.h, ctx, q))
}

func (g *grpcService) CancelTask(ctx context.Context, req *a2apb.CancelTaskRequest) (*a2apb.Task, error) {
	var meta map[string]any
	if req.GetMetadata() != nil {
		meta = req.GetMetadata().AsMap()
	}
	p, err := cancelParams(&a2av1.CancelTaskRequest{Tenant: req.GetTenant(), ID: req.GetId(), Metadata: meta})
	if err != nil {
		return nil, err
	}
	return pbTask(cancelTask(g.h, ctx, p))
}

func pbTask(t *a2av1.Task, err error) (*a2apb.Task, error) {
	if err != nil {
		return nil, err
	}
	return a2agrpc.ToTask(t)
}

func (g *grpcService) ListTasks(ctx context.Context, req *a2apb.ListTasksRequest) (*a2apb.ListTasksResponse, error) {
	v1, err := a2agrpc.ListTasksRequest(req)
	if err != nil {
		return nil, err
	}
	q, err := listQuery(v1)
	if err != nil {
		return nil, err
	}
	page, err := listTasks(g.h, ctx, q)
	if err != nil {
		return nil, err
	}
	out := &a2apb.ListTasksResponse{NextPageToken: page.NextPageToken, PageSize: int32(page.PageSize), TotalSize: int32(page.TotalSize)}
	for i := range page.Tasks {
		t, err := a2agrpc.ToTask(&page.Tasks[i])
		if err != nil {
			return nil, err
		}
		out.Tasks = append(out.Tasks, t)
	}
	return out, nil
}

func (g *grpcService) CreateTaskPushNotificationConfig(ctx context.Context, req *a2apb.TaskPushNotificationConfig) (*a2apb.TaskPushNotificationConfig, error) {
	p, err := createPushParams(a2agrpc.PushConfig(req))
	if err != nil {
		return nil, err
	}
	got, err := createPushConfig(g.h, ctx, p)
	if err != nil {
		return nil, err
	}
	return a2agrpc.ToPushConfig(got), nil
}

func (g *grpcService) GetTaskPushNotificationConfig(ctx context.Context, req *a2apb.GetTaskPushNotificationConfigRequest) (*a2apb.TaskPushNotificationConfig, error) {
	p, err := getPushParams(&a2av1.GetTaskPushNotificationConfigRequest{Tenant: req.GetTenant(), TaskID: req.GetTaskId(), ID: req.GetId()})
	if err != nil {
		return nil, err
	}
	got, err := getPushConfig(g.h, ctx, p)
	if err != nil {
		return nil, err
	}
	return a2agrpc.ToPushConfig(got), nil
}

func (g *grpcService) ListTaskPushNotificationConfigs(ctx context.Context, req *a2apb.ListTaskPushNotificationConfigsRequest) (*a2apb.ListTaskPushNotificationConfigsResponse, error) {
	p, err := listPushParams(&a2av1.ListTaskPushNotificationConfigsRequest{Tenant: req.GetTenant(), TaskID: req.GetTaskId()})
	if err != nil {
		return nil, err
	}
	list, err := listPushConfigs(g.h, ctx, p)
	if err != nil {
		return nil, err
	}
	out := &a2apb.ListTaskPushNotificationConfigsResponse{NextPageToken: list.NextPageToken}
	for _, c := range list.Configs {
		out.Configs = append(out.Configs, a2agrpc.ToPushConfig(c))
	}
	return out, nil
}

func (g *grpcService) DeleteTaskPushNotificationConfig(ctx context.Context, req *a2apb.DeleteTaskPushNotificationConfigRequest) (*emptypb.Empty, error) {
	p, err := deletePushParams(&a2av1.GetTaskPushNotificationConfigRequest{Tenant: req.GetTenant(), TaskID: req.GetTaskId(), ID: req.GetId()})
	if err != nil {
		return nil, err
	}
	if _, err := deletePushConfig(g.h, ctx, p); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (g *grpcService) GetExtendedAgentCard(ctx context.Context, req *a2apb.GetExtendedAgentCardRequest) (*a2apb.AgentCard, error) {
	_, err := extendedCard(g.h, ctx, &a2av1.GetExtendedAgentCardRequest{Tenant: req.GetTenant()})
	return nil, err
}

func optInt(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

// grpcHTTP serves gRPC calls under a's authentication: a caller refused is
// answered UNAUTHENTICATED (no or bad credentials) or PERMISSION_DENIED (an
// identity the policy does not allow, a non-loopback Origin) without reaching
// a method; an admitted one reaches unary (a unary RPC) or gs (any other
// call) with its Identity in the context, as on the JSON-RPC route. The method and the answer's code are noted for the metrics
// (telemetry.ServeA2A).
func grpcHTTP(a *Auth, gs *grpc.Server, unary *grpcUnaryServer, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		telemetry.NoteRPCMethod(w, grpcMethod(r.URL.Path))
		id, st := grpcAdmit(a, r, nil, log)
		if st != nil {
			grpcRefuse(w, st.Code(), st.Message())
			return
		}
		// The RPC notes its code here; ServeHTTP may return before a
		// stream's handler does (the client went), so it is atomic.
		var code atomic.Int64
		code.Store(-1)
		ctx := context.WithValue(WithIdentity(r.Context(), id, r.Header), grpcCodeKey{}, &code)
		if m, ok := unary.method(r); ok {
			unary.serve(w, r.WithContext(ctx), m)
		} else {
			gs.ServeHTTP(w, r.WithContext(ctx))
		}
		if c := code.Load(); c >= 0 {
			telemetry.NoteRPCCode(w, int(c))
		}
	})
}

// grpcAdmit authenticates and authorizes the caller of the gRPC call r (over
// net/http, or made from a call's metadata and connection by Split's gRPC
// server) with a, as on POST /: a refusal is UNAUTHENTICATED (no or bad
// credentials) or PERMISSION_DENIED (an identity the policy does not allow,
// a non-loopback Origin); an operator's cross-site call is a peer's. conn,
// unless nil, keeps what r's connection's client certificate makes of the
// caller (Auth.authenticateOn).
func grpcAdmit(a *Auth, r *http.Request, conn *connIdentity, log *slog.Logger) (*Identity, *status.Status) {
	if o := r.Header.Get("Origin"); o != "" && !loopback.URL(o) {
		return nil, status.New(codes.PermissionDenied, "cross-origin request refused: Origin "+o+" is not a loopback origin")
	}
	id, st, reason := a.authenticateOn(r, conn)
	if st != 0 {
		log.Warn("request refused", "status", st, "reason", reason, "spiffe_id", id.ID, "remote", r.RemoteAddr, "binding", "grpc")
		code := codes.PermissionDenied
		if st == http.StatusUnauthorized {
			code = codes.Unauthenticated
		}
		return nil, status.New(code, reason)
	}
	if id.Operator() && crossSite(r) {
		id = &Identity{ID: id.ID, Auth: id.Auth, Role: tlsconfig.RolePeer}
	}
	return id, nil
}

// grpcMethod is the A2A method a gRPC path names, "unknown" for any other
// path (whose call gs answers UNIMPLEMENTED).
func grpcMethod(path string) string {
	m, ok := strings.CutPrefix(path, "/"+a2apb.A2AService_ServiceDesc.ServiceName+"/")
	if !ok || !a2av1.IsMethod(m) {
		return "unknown"
	}
	return m
}

// grpcRefuse answers a gRPC call with an error and no message: a
// trailers-only response, the status in the headers.
func grpcRefuse(w http.ResponseWriter, code codes.Code, msg string) {
	h := w.Header()
	h.Set("Content-Type", GRPCContentType)
	h.Set("Grpc-Status", strconv.Itoa(int(code)))
	h.Set("Grpc-Message", grpcMessage(msg))
	w.WriteHeader(http.StatusOK)
}

// grpcMessage percent-encodes msg as the grpc-message header wants it: bytes
// outside printable ASCII, and '%'.
func grpcMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PlainProtocols returns the protocols of a plaintext listener on addr:
// HTTP/1.1, plus HTTP/2 without TLS (h2c, with prior knowledge, which gRPC
// clients use on plaintext) only when addr is a loopback address, the
// development mode. A plaintext listener anywhere else (agentd refuses to
// open one; a test, or a future flag, might) serves HTTP/1.1 only, so no
// gRPC call reaches it in the clear.
func PlainProtocols(addr net.Addr) *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		p.SetUnencryptedHTTP2(true)
	}
	return p
}
