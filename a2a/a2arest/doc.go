// Package a2arest is the HTTP+JSON binding of A2A 1.0 (the specification's
// section 11): its route table, the translation of a request (path, query,
// body) into the 1.0 request object the JSON-RPC binding carries as params,
// the mapping of A2A errors to HTTP statuses and the AIP-193 error body, the
// server-sent event stream of the streaming routes, and a client of all of
// it. Server and client share the route table and the error mapping.
//
// The routes are relative to the interface's URL (the base): agentd serves
// them at the root of its listener, beside the JSON-RPC endpoint (POST /),
// the card (/.well-known/), the probes, /metrics, /blobs/ and /ui/, none of
// which a route's path can reach. Tenant-prefixed routes (/{tenant}/...)
// are not served: agentd declares no tenant.
//
// The package holds no state; every function is safe for concurrent use.
package a2arest
