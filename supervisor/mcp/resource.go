package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/supervisor"
)

var _ supervisor.ResourceReader = (*Server)(nil)

// ReadResource implements supervisor.ResourceReader: resources/read of uri on
// the server, with the caller's run_id, traceparent and agent path in _meta.
// A read made while the session is being (re)connected waits up to CallWait;
// a read is idempotent, so one lost with its session is sent again on the new
// one, within the same wait. The server's refusal (an unknown resource) is the
// error, with its message.
func (s *Server) ReadResource(ctx context.Context, caller supervisor.NodeInfo, uri string) ([]supervisor.ResourceContent, error) {
	log := s.log.With("run_id", caller.RunID, "agent_path", caller.AgentPath)
	deadline := time.Now().Add(s.opts.CallWait)
	var after uint64
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		cs, gen, err := s.session(ctx, after, deadline, log)
		if err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%v (last attempt: %v)", err, lastErr)
			}
			return nil, fmt.Errorf("MCP server %q is unavailable: %w", s.cfg.Name, err)
		}
		res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri, Meta: requestMeta(caller)})
		if err == nil {
			out := make([]supervisor.ResourceContent, 0, len(res.Contents))
			for _, c := range res.Contents {
				if c != nil {
					out = append(out, supervisor.ResourceContent{URI: c.URI, MediaType: c.MIMEType, Text: c.Text, Blob: c.Blob})
				}
			}
			if len(out) == 0 {
				return nil, errors.New("the server returned no content")
			}
			log.Debug("mcp resource read", "contents", len(out))
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the read was abandoned: %w", context.Cause(ctx))
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) && !errors.Is(err, errRejected) {
			return nil, fmt.Errorf("the server refused the read: %s (code %d)", we.Message, we.Code)
		}
		// The session broke under the read: reconnect and read again.
		log.Info("mcp resource read failed: reconnecting", "err", err, "attempt", attempt)
		s.broken(gen)
		after, lastErr = gen, err
	}
	return nil, fmt.Errorf("MCP server %q did not answer the read after %d attempts: %v", s.cfg.Name, maxAttempts, lastErr)
}

// servesResources reports whether the server said it has resources, as of its
// latest session; a server not connected now counts as one that does (its
// reads fail as errors the reader sees while it is down).
func (s *Server) servesResources() bool {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	if cs == nil {
		return true
	}
	ir := cs.InitializeResult()
	return ir == nil || ir.Capabilities == nil || ir.Capabilities.Resources != nil
}
