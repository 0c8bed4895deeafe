package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// A tool call's frame is the one api.FrameWriter.Send writes, byte for
// byte, whether its arguments go out as they are (compact, nothing to
// escape) or through Send (spaces, characters encoding/json escapes, a
// conversation).
func TestToolCallFrameIsSends(t *testing.T) {
	for _, call := range []api.ToolCall{
		{Tool: "subagent.status", Args: json.RawMessage(`{"handle":"` + strings.Repeat("h", 20<<10) + `"}`), Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{Tool: "fs/read", Args: json.RawMessage(`{"path":"a\"b\\c","n":[1,2.5,null,true]}`)},
		{Tool: "fs/read", Args: json.RawMessage(` { "path" : "x" } `)},
		{Tool: "fs/read", Args: json.RawMessage(`{"q":"a<b && c>d"}`)},
		{Tool: "fs/read", Args: json.RawMessage("{\"q\":\"line\u2028sep\"}")},
		{Tool: "t\"ool", Args: json.RawMessage(`{}`)},
		{Tool: api.ToolAsk, Args: json.RawMessage(`{"question":"?"}`), Conversation: &api.Conversation{CallID: "c1"}},
	} {
		var got, want bytes.Buffer
		c := &control{w: api.NewFrameWriter(&got, 0)}
		if err := c.sendToolCall(7, &call); err != nil {
			t.Fatal(err)
		}
		if err := api.NewFrameWriter(&want, 0).Send(api.MethodToolCall, 7, &call); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s %.60s:\n got %.200s\nwant %.200s", call.Tool, call.Args, got.Bytes(), want.Bytes())
		}
	}
}

// controlPair is a control channel over in-process pipes with a scripted
// supervisor: it answers the nth request (ids from 1) with answers[n-1],
// an encoded frame, and allocates nothing while it does.
func controlPair(t *testing.T, answers [][]byte) *control {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := newControl(inR, outW, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancelCause(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		c.serve(cancel)
	}()
	sup := make(chan struct{})
	go func() {
		defer close(sup)
		buf := make([]byte, 1<<20)
		for _, a := range answers {
			if _, err := io.ReadFull(outR, buf[:4]); err != nil {
				return
			}
			if _, err := io.ReadFull(outR, buf[:binary.BigEndian.Uint32(buf)]); err != nil {
				return
			}
			if _, err := inW.Write(a); err != nil {
				return
			}
		}
		io.Copy(io.Discard, outR)
	}()
	t.Cleanup(func() {
		inW.Close()
		<-served
		outW.Close()
		<-sup
		_ = ctx
	})
	return c
}

// A large tool result's text is decoded into its frame's body, and its
// error mark written before it there: the text the model is shown costs
// the frame's body, where it cost the body, the decoder's unquoted bytes,
// the decoded string and toolText's marked copy (and the call's encoding
// 43 KB through Send's buffers for a 16 KiB call). Sizes over 32 KiB make
// every one of those a large object, which the runtime counts exactly.
func TestToolCallCopiesNothingLarge(t *testing.T) {
	handle := strings.Repeat("the agent read the file ", 40<<10/24)
	args := json.RawMessage(`{"handle":"` + handle + `"}`)
	text := "unknown handle \"" + handle + "\"\n"
	var answers [][]byte
	for id := uint64(1); id <= 6; id++ {
		f, err := api.NewResponse(id, api.TextResult(text, true))
		if err != nil {
			t.Fatal(err)
		}
		b, err := api.EncodeFrame(f)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, b)
	}
	c := controlPair(t, answers)
	ctx := context.Background()
	// The first call builds encoding/json's caches for the types.
	if r, shown, err := c.callText(ctx, api.ToolStatus, args, nil); err != nil || r.Text() != text || !r.IsError || shown != "" && shown != "ERROR: "+text {
		t.Fatalf("result %+v, shown %.40q, err %v", r, shown, err)
	}
	var shown string
	var err error
	// Each call after two collections, which empty the buffers' pools: a
	// waiting child does not collect, so its pools hold what its first
	// call grew them to.
	n := allocated(func() { runtime.GC(); runtime.GC() }, func() {
		var r api.ToolResult
		if r, shown, err = c.callText(ctx, api.ToolStatus, args, nil); shown == "" {
			shown = toolText(r) // as callTool does
		}
	})
	if err != nil || shown != "ERROR: "+text {
		t.Fatalf("shown %.40q, err %v", shown, err)
	}
	t.Logf("allocated %d bytes", n)
	if body := len(answers[0]); n > uint64(body+body/2) {
		t.Errorf("a call of %d bytes answered with %d allocated %d bytes", len(args), body, n)
	}
}

// shownTools is a textCaller: its results come with the text the model is
// to be shown.
type shownTools struct{ nopTools }

func (s *shownTools) callText(ctx context.Context, name string, args json.RawMessage, conv *api.Conversation) (api.ToolResult, string, error) {
	r, err := s.CallTool(ctx, name, args)
	return r, "the text as shown", err
}

// lastTurns records the conversation of each model call.
type lastTurns struct {
	scriptModel
	seen [][]intelligence.Message
}

func (m *lastTurns) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	m.seen = append(m.seen, slices.Clone(req.Messages))
	return m.scriptModel.Complete(ctx, req)
}

// The loop puts a textCaller's text into the conversation as the tool's
// turn, rather than toolText's copy of the result.
func TestToolTurnIsTheCallersText(t *testing.T) {
	m := &lastTurns{scriptModel: scriptModel{turns: []*intelligence.Response{toolTurn(), {Content: "done", Finish: intelligence.FinishStop}}}}
	res := (&Loop{Payload: payload(), Model: m, Caller: &shownTools{}, Report: &events{}}).Run(context.Background())
	if res.Status != api.StatusCompleted || len(m.seen) != 2 {
		t.Fatalf("%+v after %d model calls", res, len(m.seen))
	}
	if last := m.seen[1][len(m.seen[1])-1]; last.Role != intelligence.RoleTool || last.Content != "the text as shown" {
		t.Fatalf("the tool's turn: %+v", last)
	}
}
