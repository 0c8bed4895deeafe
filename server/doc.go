// Package server is agentd's HTTPS front: the chi router, the A2A JSON-RPC and
// SSE endpoint, the agent card, health and readiness, and the request limits.
// It validates every JSON-RPC request itself (a2a-go's own handler answers bad
// params with -32700, a missing method with -32601 and plain-text content
// types), then dispatches to an a2asrv.RequestHandler.
package server
