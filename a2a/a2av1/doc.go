// Package a2av1 is the A2A 1.0 wire format agentd speaks beside A2A 0.3: the
// proto3-JSON shapes of the 1.0 data model (camelCase fields, TASK_STATE_* and
// ROLE_* enum names, RFC 3339 timestamps, one-of wrappers such as
// {"statusUpdate": ...}), the JSON-RPC method names, and the conversions to and
// from a2a-go's 0.3 types, which agentd's engine uses internally. Both protocol
// versions therefore see the same tasks.
//
// The types are plain values: safe to share between goroutines once built, and
// their zero values are the proto3 defaults.
package a2av1
