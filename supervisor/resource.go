package supervisor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
)

// The agent:// resource plane, served by the supervisor like every self-tool.
// What a read reaches is decided by the reader's record, never by the uri:
//
//   - agent://subagent/HANDLE is a child's report (its result once it has
//     finished), for a handle below the reader; a child's completion is the
//     one update of that resource, which resource.wait waits for.
//   - agent://blob/ID is a stored distillate, for a blob stored by the
//     reader's own tree; a blob of another tree is refused.
//   - any other uri is a resource of an MCP server whose resources the
//     reader's scope grants ({SERVER, api.ResourcesTool}), read through the
//     server's ResourceReader.
//
// A resource_ref seed slice is read the same way when its child starts, with
// the authority of the parent that chose it (a root's own), and the child is
// handed the content, cut at Config.SeedResource bytes (Config.SeedResources
// for the whole seed), or the reason it could not be read.

// ResourceReader is an optional interface of a ToolServer: it reads one of its
// server's resources for caller. Implementations are safe for concurrent use.
type ResourceReader interface {
	ReadResource(ctx context.Context, caller NodeInfo, uri string) ([]ResourceContent, error)
}

// ResourceContent is one content of a resource, as its server returned it:
// text, or binary data in Blob.
type ResourceContent struct {
	URI       string
	MediaType string
	Text      string
	Blob      []byte
}

// resource is what a read found: the content whole, before any paging.
type resource struct {
	uri       string
	server    string // the MCP server that answered; empty for agent://
	mediaType string
	data      []byte
	base64    bool
	report    *api.ChildReport // for agent://subagent/: the report, served whole
}

// errReadResource marks a read that failed; its text is what the reader is told.
var errReadResource = errors.New("supervisor: resource not read")

func readErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errReadResource, fmt.Sprintf(format, a...))
}

// readFailure is what the reader is told of a failed read.
func readFailure(err error) string {
	return strings.TrimPrefix(err.Error(), errReadResource.Error()+": ")
}

// readResource reads uri with reader's authority. server, if set, names the
// MCP server to ask. The error's text is fit for the reader.
func (s *Supervisor) readResource(ctx context.Context, reader *node, uri, server string) (*resource, error) {
	switch {
	case strings.HasPrefix(uri, api.SubagentURIPrefix):
		h, ok := api.ParseSubagentURI(uri)
		if !ok {
			return nil, readErr("%q is not agent://subagent/HANDLE", uri)
		}
		c, ok := descendant(reader, h)
		if !ok {
			return nil, readErr("no subagent with handle %q below this one", h)
		}
		rep := childReport(c)
		return &resource{uri: uri, mediaType: "application/json", report: &rep}, nil
	case strings.HasPrefix(uri, api.BlobURIPrefix):
		id, ok := api.ParseBlobURI(uri)
		if !ok {
			return nil, readErr("%q is not agent://blob/ID", uri)
		}
		b, ok := s.blobs.Get(id)
		if !ok {
			return nil, readErr("no blob %q (unknown, or past its retention)", id)
		}
		if b.Owner != reader.root().handle {
			return nil, readErr("refused: blob %q was stored by another tree; a tree reads only the blobs it stored", id)
		}
		return &resource{uri: uri, mediaType: b.MediaType, data: b.Content}, nil
	case strings.HasPrefix(uri, api.AgentURIPrefix):
		return nil, readErr("%q: the agent:// resources are agent://subagent/HANDLE and agent://blob/ID", uri)
	}
	return s.readMCP(ctx, reader, uri, server)
}

// resourceServers returns the servers whose resources scope grants, in scope
// order.
func resourceServers(scope api.ToolScope) []string {
	var out []string
	for _, r := range scope.Allow {
		if r.Tool == api.ResourcesTool {
			out = append(out, r.Server)
		}
	}
	return out
}

// readMCP reads uri from the MCP servers reader's scope grants the resources
// of: server alone if named, else each in scope order until one has it.
func (s *Supervisor) readMCP(ctx context.Context, reader *node, uri, server string) (*resource, error) {
	granted := resourceServers(reader.payload.Scope)
	if server != "" {
		if !reader.payload.Scope.Holds(api.ToolRef{Server: server, Tool: api.ResourcesTool}) {
			return nil, readErr("this subagent's scope does not grant the resources of %q (%s/%s)", server, server, api.ResourcesTool)
		}
		granted = []string{server}
	}
	if len(granted) == 0 {
		return nil, readErr("this subagent's scope grants the resources of no MCP server")
	}
	caller := reader.info()
	var failures []string
	for _, name := range granted {
		rr, ok := s.cfg.Tools[name].(ResourceReader)
		if !ok {
			failures = append(failures, name+": serves no resources here")
			continue
		}
		contents, err := rr.ReadResource(ctx, caller, uri)
		if err != nil {
			failures = append(failures, name+": "+err.Error())
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return mcpResource(uri, name, contents), nil
	}
	return nil, readErr("%s", strings.Join(failures, "; "))
}

// mcpResource joins a resource's contents: one content as it is; several, each
// under a line naming its uri and media type. Binary content is base64.
func mcpResource(uri, server string, contents []ResourceContent) *resource {
	r := &resource{uri: uri, server: server}
	if len(contents) == 1 {
		c := contents[0]
		r.mediaType = c.MediaType
		if c.Blob != nil && c.Text == "" {
			r.data, r.base64 = []byte(base64.StdEncoding.EncodeToString(c.Blob)), true
		} else {
			r.data = []byte(c.Text)
		}
		return r
	}
	var b strings.Builder
	for i, c := range contents {
		if i > 0 {
			b.WriteString("\n")
		}
		if c.Blob != nil && c.Text == "" {
			fmt.Fprintf(&b, "--- %s (%s, base64) ---\n%s\n", c.URI, c.MediaType, base64.StdEncoding.EncodeToString(c.Blob))
		} else {
			fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", c.URI, c.MediaType, c.Text)
		}
	}
	r.mediaType, r.data = "text/plain; charset=utf-8", []byte(b.String())
	return r
}

// window returns data[offset:offset+max], its end moved back so it does not
// split a rune, and the offset after it (zero at the end).
func window(data []byte, offset int64, max int) ([]byte, int64) {
	if offset >= int64(len(data)) {
		return nil, 0
	}
	end := min(int64(len(data)), offset+int64(max))
	if end < int64(len(data)) {
		for e := end; e > offset && e > end-utf8.UTFMax; e-- {
			if utf8.RuneStart(data[e]) {
				end = e
				break
			}
		}
	}
	next := end
	if next >= int64(len(data)) {
		next = 0
	}
	return data[offset:end], next
}

// toolResourceRead serves resource.read. A child's report comes whole (as
// subagent.status gives it); a blob or an MCP resource comes in windows of at
// most max_bytes, the text of the result being the content and its
// structured content an api.ResourceRead.
func (s *Supervisor) toolResourceRead(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.ResourceReadArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || a.URI == "" {
		return api.TextResult(api.ToolResourceRead+`: bad arguments: want {"uri": "..."}`, true)
	}
	if a.Offset < 0 || a.MaxBytes < 0 {
		return api.TextResult(api.ToolResourceRead+": offset and max_bytes must not be negative", true)
	}
	r, err := s.readResource(ctx, caller, a.URI, a.Server)
	if err != nil {
		s.logRead(caller, a.URI, "", err)
		return api.TextResult(api.ToolResourceRead+": "+readFailure(err), true)
	}
	s.logRead(caller, a.URI, r.server, nil)
	if r.report != nil {
		return r.report.ToolResult()
	}
	max := api.MaxResourceRead
	if a.MaxBytes > 0 && a.MaxBytes < max {
		max = a.MaxBytes
	}
	piece, next := window(r.data, a.Offset, max)
	meta := api.ResourceRead{URI: r.uri, Server: r.server, MediaType: r.mediaType, Base64: r.base64,
		Offset: a.Offset, Bytes: len(piece), Size: int64(len(r.data)), Next: next}
	text := string(piece)
	if next > 0 {
		text += fmt.Sprintf("\n[agentd: bytes %d to %d of %d; read again with offset %d for more]", a.Offset, next, len(r.data), next)
	}
	res := api.TextResult(text, false)
	res.StructuredContent, _ = json.Marshal(meta)
	return res
}

// logRead logs one resource read at debug; the uri only with log content on
// (it is a tool argument).
func (s *Supervisor) logRead(caller *node, uri, server string, err error) {
	attrs := []any{"server", server}
	if caller.payload.Telemetry.LogContent {
		attrs = append(attrs, "uri", uri)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	s.nodeLogger(caller).Debug("resource read", attrs...)
}

// toolResourceWait serves resource.wait: for agent://subagent/HANDLE it waits
// for the child's completion, the resource's one update (at most timeout_ms,
// default and maximum api.MaxAwait), and answers with the report.
func (s *Supervisor) toolResourceWait(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.ResourceWaitArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || a.URI == "" {
		return api.TextResult(api.ToolResourceWait+`: bad arguments: want {"uri": "agent://subagent/HANDLE"}`, true)
	}
	h, ok := api.ParseSubagentURI(a.URI)
	if !ok {
		if strings.HasPrefix(a.URI, api.BlobURIPrefix) {
			return api.TextResult(api.ToolResourceWait+": a blob never changes; read it with "+api.ToolResourceRead, true)
		}
		return api.TextResult(api.ToolResourceWait+": only agent://subagent/HANDLE resources have updates to wait for", true)
	}
	c, ok := descendant(caller, h)
	if !ok {
		return api.TextResult(fmt.Sprintf("%s: no subagent with handle %q below this one", api.ToolResourceWait, h), true)
	}
	waitEnded(ctx, c, api.WaitFor(a.TimeoutMS))
	return childReport(c).ToolResult()
}

// resolveSeed reads the resource_ref slices of n's seed for its start, with
// the authority of n's parent (n's own for a root), and returns the seed the
// child is sent: each reference with what was read, cut at SeedResource bytes
// and SeedResources for the whole seed, or why it was not read. Reads stop at
// SeedReadTimeout, at n's deadline and when n is killed.
func (s *Supervisor) resolveSeed(n *node, seed api.ContextSeed, log *slog.Logger) api.ContextSeed {
	refs := 0
	for _, sl := range seed.Slices {
		if sl.Content.ResourceRef != "" {
			refs++
		}
	}
	if refs == 0 {
		return seed
	}
	reader := n
	if n.parent != nil {
		reader = n.parent
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SeedReadTimeout)
	defer cancel()
	ctx, stop := context.WithDeadline(ctx, n.deadline)
	defer stop()
	go func() {
		select {
		case <-n.killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	out := api.ContextSeed{Slices: make([]api.SeedSlice, len(seed.Slices))}
	budget := s.cfg.SeedResources
	for i, sl := range seed.Slices {
		out.Slices[i] = sl
		ref := sl.Content.ResourceRef
		if ref == "" {
			continue
		}
		res := &api.ResolvedResource{}
		out.Slices[i].Content.Resolved = res
		if budget <= 0 {
			res.Error = fmt.Sprintf("not read: the seed's resources already take its cap of %d bytes", s.cfg.SeedResources)
			log.Warn("seed resource not read", "label", sl.Label, "err", res.Error)
			continue
		}
		r, err := s.readResource(ctx, reader, ref, "")
		if err != nil {
			res.Error = readFailure(err)
			log.Warn("seed resource not read", "label", sl.Label, "err", res.Error)
			continue
		}
		data := r.data
		if r.report != nil {
			data, _ = json.Marshal(r.report)
		}
		piece, _ := window(data, 0, min(s.cfg.SeedResource, budget))
		budget -= len(piece)
		res.Text, res.MediaType, res.Base64 = string(piece), r.mediaType, r.base64
		res.Size, res.Truncated = int64(len(data)), len(piece) < len(data)
		log.Info("seed resource read", "label", sl.Label, "bytes", len(piece), "size", len(data), "truncated", res.Truncated)
	}
	return out
}
