// Package a2apb holds the Go code protoc generates from a2a.proto, agentd's
// description of the A2A 1.0 gRPC binding (package lf.a2a.v1, service
// A2AService): the messages and the gRPC client and server stubs. Do not edit
// the generated files; edit a2a.proto and run `make proto`, which also runs
// lazy.sed over a2a.pb.go so that the file registers on first use, not at
// init (lazy.go).
package a2apb
