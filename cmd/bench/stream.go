package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

var streamFigure = figure{name: "stream", run: runStream, rows: streamRows}

// streamRound is one round of figure 8.
type streamRound struct {
	Root  Summary `json:"root"`  // the root's own model streams
	Child Summary `json:"child"` // the root's child's model streams, one level down
}

// streamModel is the local streaming model server of figure 8: Chat
// Completions over server-sent events. A request of the child (its first
// user turn, its objective, is childObjective) or of a root asked to answer itself
// (rootObjective) is streamed: the first token is written and flushed, its
// time sent on first, and the rest waits until release says the client saw
// it. A root asked to delegate (viaChildObjective) calls subagent.spawn
// (sync) for the child, then answers "done" once the tool's result is in.
type streamModel struct {
	first   chan time.Time
	release chan struct{}
}

const (
	rootObjective     = "bench-stream-root"
	viaChildObjective = "bench-stream-via-child"
	childObjective    = "bench-stream-child"
)

func (m *streamModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	// The objective is the first user turn (the system prompt refers to it).
	first := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			first = m.Content
			break
		}
	}
	whole := func(msg string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"index":0,"finish_reason":%s}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`, msg)
	}
	switch {
	case strings.HasPrefix(first, viaChildObjective):
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			whole(`"stop","message":{"role":"assistant","content":"done"}`)
			return
		}
		args, _ := json.Marshal(fmt.Sprintf(`{"contract":{"objective":%q,"output_format":{"kind":"text"}},"disposition":"sync"}`, childObjective))
		whole(`"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"subagent_spawn","arguments":` + string(args) + `}}]}`)
	case strings.HasPrefix(first, childObjective), strings.HasPrefix(first, rootObjective):
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := func(delta, finish string) {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
			fl.Flush()
		}
		t0 := time.Now()
		chunk(`{"role":"assistant","content":"First"}`, "null")
		m.first <- t0
		select {
		case <-m.release:
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
			return
		}
		for _, word := range []string{" token", " and", " the", " rest."} {
			chunk(fmt.Sprintf(`{"content":%q}`, word), "null")
		}
		chunk(`{}`, `"stop"`)
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n")
		fl.Flush()
	default:
		http.Error(w, `{"error":{"message":"unknown objective"}}`, http.StatusBadRequest)
	}
}

// runStream measures figure 8: from the local model server's first token
// (its flush) to the A2A client's first artifact-update event of a
// message/stream (over mTLS keep-alive), with the root's own model
// streaming and with its child's, interleaved.
func runStream(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	dir, err := certsDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	model := &streamModel{first: make(chan time.Time, 1), release: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ms := &http.Server{Handler: model, ReadHeaderTimeout: 10 * time.Second}
	go ms.Serve(ln)
	defer ms.Close()
	args := append(append(tlsArgs(dir), operatorArgs()...), "--warm-pool", fmt.Sprint(benchPool),
		"--intelligence", "http://"+ln.Addr().String()+"/v1", "--model", "bench")
	srv, err := startServe(ctx, cfg.Agentd, args, logw)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	c, err := benchClient(dir, 1)
	if err != nil {
		return nil, err
	}
	var seq int64
	once := func(objective string) (time.Duration, error) {
		seq++
		return firstChunk(ctx, c, srv.url, model, streamBody(seq, objective))
	}
	for _, o := range []string{rootObjective, viaChildObjective} { // warm up
		if _, err := once(o); err != nil {
			return nil, err
		}
	}
	samples := max(cfg.E2ESamples/2, 10)
	var rounds []streamRound
	for r := 0; r < cfg.Rounds; r++ {
		var root, child []time.Duration
		for i := 0; i < samples; i++ {
			for k := 0; k < 2; k++ {
				if (k+i+r)%2 == 0 {
					d, err := once(rootObjective)
					if err != nil {
						return nil, err
					}
					root = append(root, d)
				} else {
					d, err := once(viaChildObjective)
					if err != nil {
						return nil, err
					}
					child = append(child, d)
				}
			}
		}
		rounds = append(rounds, streamRound{Root: summarize(root), Child: summarize(child)})
		fmt.Fprintf(logw, "bench: stream round %d: %+v\n", r+1, rounds[r])
	}
	return rounds, nil
}

func streamBody(id int64, text string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/stream","params":{"message":{"kind":"message","messageId":"bench-stream-%d","role":"user","parts":[{"kind":"text","text":%q}]}}}`,
		id, id, text)
}

// firstChunk sends one message/stream and returns the time from the model's
// first token to the first artifact-update event read that carries it, then
// reads the stream to its completed end.
func firstChunk(ctx context.Context, c *http.Client, url string, model *streamModel, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("message/stream: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var d time.Duration
	completed := false
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if d == 0 && bytes.Contains(data, []byte(`"kind":"artifact-update"`)) && bytes.Contains(data, []byte(`"text":"First`)) {
			at := time.Now()
			select {
			case t0 := <-model.first:
				d = at.Sub(t0)
			case <-time.After(10 * time.Second):
				return 0, errors.New("message/stream: an artifact update, and no first token from the model")
			}
			model.release <- struct{}{}
		}
		if bytes.Contains(data, []byte(`"final":true`)) {
			if !bytes.Contains(data, []byte(`"state":"completed"`)) {
				return 0, fmt.Errorf("message/stream: the task did not complete: %.500s", data)
			}
			completed = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if d == 0 || !completed {
		return 0, fmt.Errorf("message/stream: first chunk seen %v, completed %v", d != 0, completed)
	}
	return d, nil
}

func streamRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[streamRound](raw)
	if err != nil {
		return nil, err
	}
	return []row{
		{fig: 8, what: "streaming: the model's first token to the A2A client's first artifact-update (message/stream, mTLS), the root's model",
			p50: fmtMS(medianOf(rounds, func(r streamRound) float64 { return r.Root.P50 })), p99: fmtMS(medianOf(rounds, func(r streamRound) float64 { return r.Root.P99 })),
			other: fmt.Sprintf("%d messages a round; goal p50 <= 5 ms", rounds[0].Root.N)},
		{fig: 8, what: "streaming: the same, the root's child's model (one level down)",
			p50: fmtMS(medianOf(rounds, func(r streamRound) float64 { return r.Child.P50 })), p99: fmtMS(medianOf(rounds, func(r streamRound) float64 { return r.Child.P99 })),
			other: "goal p50 <= 10 ms"},
	}, nil
}
