# make proto runs this over protoc-gen-go's a2a.pb.go (lazy.go says why):
# no init, the message and enum infos made on first use, and every use of
# them registers the file first.
/^func init() { file_a2a_a2agrpc_a2apb_a2a_proto_init() }$/d
s/^\tmi := &file_a2a_a2agrpc_a2apb_a2a_proto_msgTypes\[/\tmi := \&msgTypes()[/
s/^\treturn \(&\{0,1\}\)file_a2a_a2agrpc_a2apb_a2a_proto_enumTypes\[/\treturn \1enumTypes()[/
s/^var file_a2a_a2agrpc_a2apb_a2a_proto_enumTypes = make(\[\]protoimpl.EnumInfo, \([0-9]*\))$/var file_a2a_a2agrpc_a2apb_a2a_proto_enumTypes []protoimpl.EnumInfo \/\/ made by registerFile (lazy.go)\n\nconst numEnumTypes = \1\n/
s/^var file_a2a_a2agrpc_a2apb_a2a_proto_msgTypes = make(\[\]protoimpl.MessageInfo, \([0-9]*\))$/var file_a2a_a2agrpc_a2apb_a2a_proto_msgTypes []protoimpl.MessageInfo \/\/ made by registerFile (lazy.go)\n\nconst numMsgTypes = \1\n/
