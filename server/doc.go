// Package server is agentd's HTTPS front: the chi router, the JSON-RPC and SSE
// endpoint serving A2A 0.3 and A2A 1.0 (chosen by method name and the
// A2A-Version header) over one a2asrv.RequestHandler, the a2a.* operator
// methods, the agent card, stored distillates, health, readiness and metrics,
// authentication (mTLS SPIFFE ID, JWT-SVID or static bearer token) and
// authorization (peer or operator), and the request limits.
//
// Every JSON-RPC method is an entry of one table (methods.go): its params
// type, how its params are checked and converted (for 1.0, into the
// handler's 0.3 types through a2av1), and its handler. The envelope is read
// and the params decoded in one place, and errors are error values turned
// into JSON-RPC error objects only when written. The handler (the task
// engine) checks the A2A 0.3 params it is given itself. (a2a-go's own
// JSON-RPC handler answers bad params with -32700, a missing method with
// -32601 and plain-text content types, hence this front.)
package server
