package a2apb

import (
	"sync"

	"google.golang.org/protobuf/runtime/protoimpl"
)

// The file's descriptors and Go types are registered (with the protobuf
// registry, protoregistry.GlobalFiles and GlobalTypes) on first use, not at
// package init: every agentd process links this package, but only a server
// with the gRPC binding or a client of a gRPC peer uses it, and the
// registration allocated about 50 KB at init, kept for the process's life
// (in every subagent: docs/performance.md, figure 9). `make proto` runs
// lazy.sed over protoc-gen-go's output: it drops the generated init, leaves
// the message and enum infos unmade, and routes the generated methods' uses
// of them (Reset, ProtoReflect, an enum's Descriptor and Type) through
// msgTypes and enumTypes, which register the file first.
// File_a2a_a2agrpc_a2apb_a2a_proto is nil until then.
var register sync.Once

// registerFile makes the message and enum infos and registers the file.
func registerFile() {
	file_a2a_a2agrpc_a2apb_a2a_proto_enumTypes = make([]protoimpl.EnumInfo, numEnumTypes)
	file_a2a_a2agrpc_a2apb_a2a_proto_msgTypes = make([]protoimpl.MessageInfo, numMsgTypes)
	file_a2a_a2agrpc_a2apb_a2a_proto_init()
}

// msgTypes is the file's message infos, the file registered.
func msgTypes() []protoimpl.MessageInfo {
	register.Do(registerFile)
	return file_a2a_a2agrpc_a2apb_a2a_proto_msgTypes
}

// enumTypes is the file's enum infos, the file registered.
func enumTypes() []protoimpl.EnumInfo {
	register.Do(registerFile)
	return file_a2a_a2agrpc_a2apb_a2a_proto_enumTypes
}
