package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// sendJSONCases are params decodeSendFast takes (figure 2's first) and
// params it must leave to json.Unmarshal.
var sendJSONCases = []string{
	`{"message":{"kind":"message","messageId":"bench-1-1","role":"user","parts":[{"kind":"text","text":"hello"}]}}`,
	` { "message" : { "parts" : [ { "text" : "a" , "kind" : "text" } , {"kind":"text","text":""} ] , "role":"agent", "messageId":"m", "contextId":"c", "taskId":"t" } } `,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"é 日本 😀 <&>"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"esc\\n"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"data","data":{}}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"text":"no kind"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x","metadata":{"a":1}}]}}`,
	`{"message":{"messageId":"m","role":"user","metadata":{"a":1},"parts":[{"kind":"text","text":"x"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"configuration":{"blocking":true}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"metadata":{"k":"v"}}`,
	`{"message":{"MessageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`,
	`{"message":{"messageId":"m","messageId":"n","role":"user","parts":[{"kind":"text","text":"x"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"message":null}`,
	`{"message":{"messageId":null,"role":"user","parts":[{"kind":"text","text":"x"}]}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}} x`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"},]}}`,
	`{"message":{"messageId":"m","role":"user"}}`,
	`{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"bad \xff"}]}}`,
	`{}`,
}

// TestDecodeSendFastMatchesUnmarshal: what decodeSendFast takes, it decodes
// as json.Unmarshal does (a2a-go's part decoding included); figure 2's
// params are taken.
func TestDecodeSendFastMatchesUnmarshal(t *testing.T) {
	for i, raw := range sendJSONCases {
		checkSendFast(t, []byte(raw))
		if i < 3 {
			var p a2a.MessageSendParams
			if !decodeSendFast([]byte(raw), &p) {
				t.Errorf("declined %s", raw)
			}
		}
	}
}

func checkSendFast(t *testing.T, raw []byte) {
	t.Helper()
	var fast a2a.MessageSendParams
	if !decodeSendFast(raw, &fast) {
		if !reflect.DeepEqual(fast, a2a.MessageSendParams{}) {
			t.Errorf("declined %s but changed the params: %+v", raw, fast)
		}
		return
	}
	var want a2a.MessageSendParams
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("took %s, which json.Unmarshal refuses: %v", raw, err)
	}
	if err := checkJSON(raw, schemaOf(reflect.TypeOf(&want))); err != nil {
		t.Fatalf("took %s, which the strict pass refuses: %v", raw, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Errorf("%s:\n got %#v\nwant %#v", raw, fast.Message, want.Message)
	}
}

// TestDecodeSendFastAllocs pins the decoding of figure 2's params
// (decodeParams: the strict pass, then decodeSendFast) at seven
// allocations: the params, the message, its two strings, the part's text,
// the parts and the part in its interface; json.Unmarshal made 31.
func TestDecodeSendFastAllocs(t *testing.T) {
	raw := []byte(sendJSONCases[0])
	if n := testing.AllocsPerRun(100, func() {
		var p a2a.MessageSendParams
		if err := decodeParams(raw, &p, paramsObject); err != nil {
			t.Fatal(err)
		}
	}); n > 7 {
		t.Errorf("decodeParams of a message/send: %v allocations, want at most 7", n)
	}
}

// FuzzDecodeSendFast: for any params, decodeSendFast declines or decodes
// them as json.Unmarshal does.
func FuzzDecodeSendFast(f *testing.F) {
	for _, s := range sendJSONCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkSendFast(t, raw) })
}
