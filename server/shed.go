package server

import (
	"fmt"

	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/internal/admit"
)

// Shedding: a request the service's admission control turns away (no slot,
// no room in the queue) is answered so a client can act on it, whatever the
// protocol version and whether the method streams:
//
//	HTTP/1.1 429 Too Many Requests
//	Retry-After: 8
//	Content-Type: application/json
//
//	{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"agentd is at capacity: retry after 8s",
//	 "data":{"retryAfterSeconds":8,"reason":"queue_full","detail":"..."}}}
//
// The code is JSON-RPC's generic server error (-32000, as for a drain), so
// no A2A code is taken; clients branch on the HTTP status or on
// data.retryAfterSeconds. For A2A 1.0 the data is the array 1.0 errors
// carry: a google.rpc.ErrorInfo (reason RESOURCE_EXHAUSTED, the detail,
// retryAfterSeconds and the shedding reason in its metadata) and a
// google.rpc.RetryInfo with the same delay. JSON-RPC over HTTP usually
// answers 200 with an error object; a shed is 429 instead because it is an
// answer about the transport's load, which proxies, load balancers and HTTP
// retry policies understand (and a JSON-RPC client that reads the body still
// finds the error). A stream that is shed never starts: it is answered the
// same way, not with an event stream.

// shedError is the JSON-RPC error of a shed request.
func shedError(e *admit.ShedError) *RPCError {
	n := e.RetryAfterSeconds()
	return &RPCError{
		Code:    CodeServerError,
		Message: fmt.Sprintf("agentd is at capacity: retry after %ds", n),
		Data: map[string]any{
			"retryAfterSeconds": n,
			"reason":            e.Reason,
			"detail":            e.Error(),
		},
		retryAfter: n,
	}
}

// shedErrorV1 reshapes a shed error for an A2A 1.0 client.
func shedErrorV1(e *RPCError) *RPCError {
	reason, _ := e.Data.(map[string]any)["reason"].(string)
	return &RPCError{
		Code:       e.Code,
		Message:    e.Message,
		Data:       a2av1.ResourceExhausted(e.detail(), reason, e.retryAfter),
		retryAfter: e.retryAfter,
	}
}
