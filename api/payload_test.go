package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func validPayload() SpawnPayload {
	return SpawnPayload{
		AgentID:   "0.2",
		AgentPath: "0.2",
		Depth:     1,
		Contract: OutputContract{
			Objective:    "count the words",
			OutputFormat: OutputFormat{Kind: FormatJSON, Schema: json.RawMessage(`{"type":"object"}`)},
			ToolGuidance: "prefer search",
			Boundaries:   "stop after one answer",
		},
		Seed:         ContextSeed{Slices: []SeedSlice{{Label: "file_path", Content: SeedContent{Text: "/tmp/x"}}, {Label: "doc", Content: SeedContent{ResourceRef: "agent://blob/1"}}}},
		Scope:        ToolScope{Allow: []ToolRef{{Server: "github", Tool: "search"}}, Tags: ToolTags{UntrustedInput: true}},
		Limits:       Limits{MaxSteps: 50, MaxTokens: 200000, Deadline: Duration(90 * time.Second), MaxChildren: 8},
		Telemetry:    Telemetry{RunID: "01J", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", LogLevel: "info"},
		Intelligence: Intelligence{Endpoint: "builtin:demo"},
	}
}

func TestSpawnPayloadRoundTrip(t *testing.T) {
	p := validPayload()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"agent_id"`, `"agent_path"`, `"output_format"`, `"tool_guidance"`, `"max_steps"`, `"max_tokens"`, `"deadline":"1m30s"`, `"max_children"`, `"run_id"`, `"resource_ref"`, `"untrusted_input"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("encoded payload lacks %s: %s", field, b)
		}
	}
	var q SpawnPayload
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip changed the payload:\n got %+v\nwant %+v", q, p)
	}
	if err := q.Validate(); err != nil {
		t.Fatalf("valid payload refused: %v", err)
	}
}

func TestSpawnPayloadValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*SpawnPayload)
		want   string
	}{
		{"empty objective", func(p *SpawnPayload) { p.Contract.Objective = "  \n" }, "spawn denied: missing objective/output-contract"},
		{"zero deadline", func(p *SpawnPayload) { p.Limits.Deadline = 0 }, "deadline must be positive"},
		{"negative deadline", func(p *SpawnPayload) { p.Limits.Deadline = Duration(-time.Second) }, "deadline must be positive"},
		{"endless deadline", func(p *SpawnPayload) { p.Limits.Deadline = Duration(1000 * time.Hour) }, "exceeds the maximum"},
		{"no steps", func(p *SpawnPayload) { p.Limits.MaxSteps = 0 }, "max_steps"},
		{"no tokens", func(p *SpawnPayload) { p.Limits.MaxTokens = 0 }, "max_tokens"},
		{"unknown format", func(p *SpawnPayload) { p.Contract.OutputFormat = OutputFormat{Kind: "yaml"} }, "output_format.kind"},
		{"schema not JSON", func(p *SpawnPayload) { p.Contract.OutputFormat.Schema = json.RawMessage(`{`) }, "output_format.schema"},
		{"schema on text", func(p *SpawnPayload) { p.Contract.OutputFormat.Kind = FormatText }, "only allowed with kind"},
		{"unlabeled slice", func(p *SpawnPayload) { p.Seed.Slices[0].Label = "" }, "missing label"},
		{"slice with both", func(p *SpawnPayload) { p.Seed.Slices[0].Content.ResourceRef = "x" }, "exactly one"},
		{"tool without server", func(p *SpawnPayload) { p.Scope.Allow[0].Server = "" }, "scope.allow[0]"},
		{"unminted identity", func(p *SpawnPayload) { p.AgentID = "" }, "minted"},
		{"no run id", func(p *SpawnPayload) { p.Telemetry.RunID = "" }, "run_id"},
		{"no intelligence", func(p *SpawnPayload) { p.Intelligence.Endpoint = "" }, "intelligence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPayload()
			p.Seed.Slices = append([]SeedSlice(nil), p.Seed.Slices...)
			p.Scope.Allow = append([]ToolRef(nil), p.Scope.Allow...)
			tt.mutate(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`1500`), &d); err != nil || d.D() != 1500*time.Millisecond {
		t.Fatalf("ms form: %v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`"2m"`), &d); err != nil || d.D() != 2*time.Minute {
		t.Fatalf("string form: %v %v", d, err)
	}
	for _, bad := range []string{`"forever"`, `true`, `1e300`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s accepted as a duration", bad)
		}
	}
}
