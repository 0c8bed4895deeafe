package agent

import (
	"encoding/json"
	"testing"

	"github.com/agentd/agentd/api"
)

func TestCheckJSON(t *testing.T) {
	schema, err := compileSchema(api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(countSchema)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		answer, value string
		ok            bool
	}{
		{`{"count": 2}`, `{"count":2}`, true},
		{"```json\n{\"count\":2}\n```", `{"count":2}`, true},
		{"```\n{\"count\":2}\n```", `{"count":2}`, true},
		{`{"count": 2, "extra": 1}`, `{"count":2,"extra":1}`, false},
		{`[1]`, `[1]`, false},
		{`the count is 2`, ``, false},
		{"```python\nprint(2)\n```", ``, false},
	} {
		v, err := checkJSON(schema, tc.answer)
		if (err == nil) != tc.ok || string(v) != tc.value {
			t.Errorf("%q: value %s, err %v", tc.answer, v, err)
		}
	}
	if _, err := compileSchema(api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-04/schema#"}`)}); err == nil {
		t.Error("a draft-04 schema compiled")
	}
	if _, err := compileSchema(api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"$ref":"http://elsewhere/schema.json"}`)}); err == nil {
		t.Error("a schema with an external ref compiled")
	}
	if rs, err := compileSchema(api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`true`)}); err != nil || rs == nil {
		t.Errorf("the schema true: %v", err)
	}
}

func FuzzJSONAnswer(f *testing.F) {
	f.Add("```json\n{\"a\":1}\n```")
	f.Add("```")
	f.Add(" [1, 2] ")
	schema, err := compileSchema(api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(countSchema)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		v, _ := checkJSON(schema, answer)
		if v != nil && !json.Valid(v) {
			t.Fatalf("%q gave invalid JSON %q", answer, v)
		}
		if s := jsonAnswer(answer); len(s) > len(answer) {
			t.Fatalf("jsonAnswer grew %q to %q", answer, s)
		}
	})
}
