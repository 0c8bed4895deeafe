package a2arest

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"
)

// FuzzParams: whatever the method, path, query and body, Match and Params
// never panic; what Params accepts is one JSON object holding every path
// parameter with its value. The seed corpus is in testdata/fuzz/FuzzParams.
func FuzzParams(f *testing.F) {
	f.Add("POST", "/message:send", "", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`)
	f.Add("GET", "/tasks/t1", "historyLength=2", "")
	f.Fuzz(func(t *testing.T, method, path, rawQuery, body string) {
		rt, params, _, err := Match(method, path)
		if err != nil {
			if !errors.Is(err, ErrNoRoute) && !errors.Is(err, ErrMethod) {
				t.Fatalf("Match: %v", err)
			}
			return
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		out, err := Params(rt, params, q, []byte(body))
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("Params: %v", err)
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("Params gave %q: %v", out, err)
		}
		for _, p := range params {
			var s string
			if json.Unmarshal(obj[p.Name], &s) != nil || s != p.Value {
				t.Fatalf("Params %q: %s is %s, want %q", out, p.Name, obj[p.Name], p.Value)
			}
		}
	})
}
