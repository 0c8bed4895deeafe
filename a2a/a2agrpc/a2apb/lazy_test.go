package a2apb

import (
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// registeredAtInit is whether the file was registered when this file's init
// ran, after every init of the package's other files (a2a.pb.go's among them).
var registeredAtInit bool

func init() { registeredAtInit = File_a2a_a2agrpc_a2apb_a2a_proto != nil }

// The file registers on its first use, not at init (where every agentd
// process, every subagent among them, paid about 50 KB for it), and that use
// may come from many goroutines at once (under -race); afterwards the
// messages, the enums and the registry behave as when protoc-gen-go's init
// registered it.
func TestRegisteredOnFirstUse(t *testing.T) {
	if registeredAtInit {
		t.Fatal("the file was registered at package init")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			in := &Message{MessageId: "m", Role: Role_ROLE_USER, Parts: []*Part{{Content: &Part_Text{Text: "hello"}}}}
			if i%2 == 0 {
				in.Reset()
				in.MessageId = "m"
			}
			b, err := proto.Marshal(in)
			if err != nil {
				errs <- err
				return
			}
			var out Message
			if err := proto.Unmarshal(b, &out); err != nil {
				errs <- err
				return
			}
			if out.GetMessageId() != "m" {
				t.Errorf("round trip: %v", &out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if File_a2a_a2agrpc_a2apb_a2a_proto == nil {
		t.Fatal("the file is not registered after its first use")
	}
	if s := TaskState_TASK_STATE_WORKING.String(); s != "TASK_STATE_WORKING" {
		t.Errorf("enum String = %q", s)
	}
	if _, err := protoregistry.GlobalFiles.FindFileByPath("a2a/a2agrpc/a2apb/a2a.proto"); err != nil {
		t.Errorf("registry: %v", err)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("lf.a2a.v1.Task"))
	if err != nil || mt.Descriptor().Fields().ByName("id") == nil {
		t.Errorf("registry: lf.a2a.v1.Task: %v", err)
	}
}
