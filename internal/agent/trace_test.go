package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/otlptest"
)

// A child's run exports its spans through the OTEL_* environment: the run
// span under the payload's traceparent, a chat span per model call and an
// execute_tool span per tool call, whose traceparent rides in the tool/call
// frame. Every span has reached the collector before the result frame.
func TestServeExportsSpans(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	script := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(script, []byte("[default]\ncall subagent.status {\"handle\":\"h\"}\nanswer \"done\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spawnID = "00f067aa0ba902b7"
	)
	r, w, inW, code := serveOverPipes("", nil)
	if f, err := r.Read(); err != nil || f.Method != api.MethodReady {
		t.Fatalf("first frame %+v %v", f, err)
	}
	p := payload()
	p.Intelligence.Endpoint = "builtin:script=" + script
	p.Telemetry.Traceparent = "00-" + traceID + "-" + spawnID + "-01"
	if err := w.Send(api.MethodSpawn, 0, p); err != nil {
		t.Fatal(err)
	}
	var call api.ToolCall
	var spansAtResult []otlptest.Span
	for {
		f, err := r.Read()
		if err != nil {
			t.Fatalf("control channel: %v", err)
		}
		if f.Method == api.MethodToolCall {
			if err := api.DecodeParams(f, &call); err != nil {
				t.Fatal(err)
			}
			resp, _ := api.NewResponse(f.ID, api.TextResult("ok", false))
			if err := w.Write(resp); err != nil {
				t.Fatal(err)
			}
		}
		if f.Method == api.MethodResult {
			spansAtResult = rcv.Spans()
			break
		}
	}
	inW.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}

	byName := map[string]otlptest.Span{}
	for _, s := range spansAtResult {
		if s.TraceID != traceID {
			t.Errorf("span %s in trace %s, want %s", s.Name, s.TraceID, traceID)
		}
		byName[s.Name] = s
	}
	run, chat, tool := byName["agentd.run"], byName["chat builtin:script"], byName["execute_tool subagent.status"]
	if len(spansAtResult) != 4 || run.ParentSpanID != spawnID || chat.ParentSpanID != run.SpanID || tool.ParentSpanID != run.SpanID {
		t.Fatalf("spans before the result frame:\n%s", otlptest.Dump(spansAtResult))
	}
	if run.Attrs["agentd.agent_path"] != "0" || run.Attrs["agentd.status"] != "completed" || run.Attrs["resource.agentd.role"] != "subagent" {
		t.Errorf("run span attributes %v", run.Attrs)
	}
	if call.Traceparent != "00-"+traceID+"-"+tool.SpanID+"-01" {
		t.Errorf("tool/call traceparent %q, want the execute_tool span %s", call.Traceparent, tool.SpanID)
	}
}
