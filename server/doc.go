// Package server is agentd's HTTPS front: the chi router, the JSON-RPC and SSE
// endpoint serving A2A 0.3 and A2A 1.0 (chosen by method name and the
// A2A-Version header) over one a2asrv.RequestHandler, the a2a.* operator
// methods, the agent card, stored distillates, health, readiness and metrics,
// authentication (mTLS SPIFFE ID, JWT-SVID or static bearer token) and
// authorization (peer or operator), and the request limits. It validates every
// JSON-RPC request itself (a2a-go's own handler answers bad params with
// -32700, a missing method with -32601 and plain-text content types) before
// dispatching it.
package server
