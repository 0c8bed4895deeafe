package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentd/agentd/api"
)

// compileSchema resolves a JSON output format's schema; nil when there is no
// schema to check (text, markdown, or JSON of any shape).
func compileSchema(f api.OutputFormat) (*jsonschema.Resolved, error) {
	if f.Kind != api.FormatJSON || len(f.Schema) == 0 {
		return nil, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(f.Schema, &s); err != nil {
		return nil, fmt.Errorf("output_format.schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("output_format.schema: %w", err)
	}
	// Only draft 2020-12 and draft-07 validate; find out now, not per answer.
	if err := rs.Validate(nil); err != nil && strings.HasPrefix(err.Error(), "cannot validate version") {
		return nil, fmt.Errorf("output_format.schema: %w", err)
	}
	return rs, nil
}

// maxMismatchText bounds the validation error quoted to the model and parent.
const maxMismatchText = 600

// checkJSON extracts the JSON value of an answer (a whole-answer code fence is
// tolerated) and validates it against schema (nil: any JSON value). It returns
// the compact value when the answer parses, even when it does not validate.
func checkJSON(schema *jsonschema.Resolved, answer string) (json.RawMessage, error) {
	raw := []byte(jsonAnswer(answer))
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("the answer is not a JSON value: %v", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("the answer is not a JSON value: %v", err)
	}
	value := json.RawMessage(compact.Bytes())
	if schema == nil {
		return value, nil
	}
	if err := schema.Validate(v); err != nil {
		msg := err.Error()
		if len(msg) > maxMismatchText {
			msg = msg[:maxMismatchText] + "..."
		}
		return value, errors.New(msg)
	}
	return value, nil
}

// jsonAnswer strips surrounding space and a code fence that wraps the whole
// answer (```json ... ``` or ``` ... ```), which models add despite the prompt.
func jsonAnswer(answer string) string {
	s := strings.TrimSpace(answer)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	body := s[3 : len(s)-3]
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return strings.TrimSpace(body)
	}
	if lang := strings.TrimSpace(body[:nl]); lang != "" && lang != "json" && lang != "JSON" {
		return s
	}
	return strings.TrimSpace(body[nl+1:])
}

// repairPrompt is the one repair turn the model gets for a mismatch.
func repairPrompt(mismatch error) string {
	return "Your answer does not satisfy the required output format: " + mismatch.Error() +
		"\nReply again with only the corrected JSON value, no prose and no code fence."
}
