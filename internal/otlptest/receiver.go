// Package otlptest is an OTLP/HTTP trace receiver for tests: an httptest
// server that decodes the protobuf export requests an OpenTelemetry exporter
// sends to /v1/traces and keeps every span.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, with ids in lowercase hex and attributes (the
// span's, then its resource's under "resource." keys) as strings.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string
	Service                       string // the resource's service.name
	Attrs                         map[string]string
	Error                         bool // status code ERROR
}

func (s Span) String() string {
	return fmt.Sprintf("%s [%s] %s span=%s parent=%s", s.Service, s.Attrs["agentd.agent_path"], s.Name, s.SpanID, s.ParentSpanID)
}

// Receiver collects the spans exported to it. It is safe for concurrent use.
type Receiver struct {
	*httptest.Server

	mu    sync.Mutex // guards spans, errs
	spans []Span
	errs  []error
}

// NewReceiver starts a receiver; Close it when done. Point an exporter at it
// with OTEL_EXPORTER_OTLP_ENDPOINT=URL.
func NewReceiver() *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// NewTLSReceiver starts a receiver over HTTPS with cfg (nil for httptest's
// defaults); its certificate is Certificate(). Close it when done.
func NewTLSReceiver(cfg *tls.Config) *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.Server.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	r.Server.TLS = cfg
	r.Server.StartTLS()
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, err)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		r.fail(w, err)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.fail(w, fmt.Errorf("content type %q, want application/x-protobuf", ct))
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		r.fail(w, err)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				a := attrs(sp.GetAttributes())
				for k, v := range res {
					a["resource."+k] = v
				}
				got = append(got, Span{
					TraceID:      hex.EncodeToString(sp.GetTraceId()),
					SpanID:       hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
					Name:         sp.GetName(),
					Kind:         strings.TrimPrefix(sp.GetKind().String(), "SPAN_KIND_"),
					Service:      res["service.name"],
					Attrs:        a,
					Error:        sp.GetStatus().GetCode().String() == "STATUS_CODE_ERROR",
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *Receiver) fail(w http.ResponseWriter, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Errs returns the export requests the receiver could not decode.
func (r *Receiver) Errs() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Tree checks that spans form one trace whose parent links make a single tree:
// one trace id, one root (no parent), and every other span's parent among the
// spans. It returns a description of each violation, none when they hold.
func Tree(spans []Span) []string {
	var bad []string
	ids := make(map[string]bool, len(spans))
	traces := make(map[string]int)
	for _, s := range spans {
		if ids[s.SpanID] {
			bad = append(bad, "span id twice: "+s.String())
		}
		ids[s.SpanID] = true
		traces[s.TraceID]++
	}
	if len(traces) != 1 {
		bad = append(bad, fmt.Sprintf("%d trace ids, want 1: %v", len(traces), traces))
	}
	var roots []string
	for _, s := range spans {
		switch {
		case s.ParentSpanID == "":
			roots = append(roots, s.String())
		case !ids[s.ParentSpanID]:
			bad = append(bad, "orphan (parent not received): "+s.String())
		}
	}
	if len(roots) != 1 {
		bad = append(bad, fmt.Sprintf("%d roots, want 1: %v", len(roots), roots))
	}
	sort.Strings(bad)
	return bad
}

// Dump formats spans as an indented tree (by parent links), for test logs.
func Dump(spans []Span) string {
	children := make(map[string][]Span)
	ids := make(map[string]bool)
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentSpanID == "" || !ids[s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
	}
	var b bytes.Buffer
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), s)
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		default:
			out[kv.GetKey()] = strings.TrimSpace(fmt.Sprint(anyValue(v)))
		}
	}
	return out
}

func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, anyValue(e))
		}
		return out
	}
	return ""
}
