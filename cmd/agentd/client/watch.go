package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/server/console"
)

// maxSnapshotLine bounds one event of the console stream as ctl reads it.
const maxSnapshotLine = 64 << 20

// watchTree is `agentd ctl a2a.Tree --watch`: it reads the console's
// snapshot stream (GET /ui/events, the operator's) and draws each snapshot:
// on a terminal it clears the screen and redraws, otherwise it prints each
// one once, each followed by a blank line. It returns when the stream ends (the
// service stopped: nil), or ctx does.
func watchTree(ctx context.Context, hc *http.Client, base string, stdout, stderr io.Writer) error {
	url := strings.TrimSuffix(base, "/") + console.EventsPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return cli.UsageError("--to %q: %v", base, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("watch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("watch %s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	tty := cli.IsTerminal(stdout)
	err = readSSE(resp.Body, func(event, data string) error {
		if event != console.EventName {
			return nil
		}
		var ev console.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("watch: a snapshot that does not decode: %w", err)
		}
		var b strings.Builder
		if tty {
			b.WriteString("\x1b[H\x1b[2J") // home, clear
		}
		printSnapshot(&b, &ev, base)
		if !tty {
			b.WriteString("\n") // a blank line ends each snapshot
		}
		_, err := io.WriteString(stdout, b.String())
		return err
	})
	if ctx.Err() != nil {
		return nil // interrupted or --timeout: the watch is over
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "agentd: the tree stream ended (the service stopped serving)")
	return nil
}

// readSSE calls fn with each event of a text/event-stream until it ends.
func readSSE(r io.Reader, fn func(event, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxSnapshotLine)
	var event string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if err := fn(event, strings.Join(data, "\n")); err != nil {
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"): // a comment (keep-alive)
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				data = append(data, value)
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("watch: read the stream: %w", err)
	}
	return nil
}

// printSnapshot draws one snapshot: the tree as `ctl a2a.Tree` prints it
// (at the server's clock), the subagents that ended lately and the gauges.
func printSnapshot(w io.Writer, ev *console.Event, base string) {
	s := &ev.Snapshot
	fmt.Fprintf(w, "agentd %s at %s\n", base, ev.At.Local().Format("15:04:05"))
	printTree(w, &s.TreeResult, ev.At)
	if len(s.Ended) > 0 {
		fmt.Fprintln(w, "ended lately:")
		for i, e := range s.Ended {
			if i == 5 {
				fmt.Fprintf(w, "   ... and %d more\n", len(s.Ended)-5)
				break
			}
			cause := ""
			if e.Cause != "" {
				cause = " (" + e.Cause + ")"
			}
			fmt.Fprintf(w, "   %s  %s  [%s%s]  tokens %d  %s ago\n", e.AgentPath, e.TaskID, e.Status, cause,
				e.Usage.Tokens(), ev.At.Sub(e.EndedAt).Round(time.Second))
		}
	}
	var g []string
	for _, x := range s.Gauges {
		if x.Max > 0 {
			g = append(g, fmt.Sprintf("%s %v/%v", x.Name, x.Value, x.Max))
		} else {
			g = append(g, fmt.Sprintf("%s %v", x.Name, x.Value))
		}
	}
	if len(g) > 0 {
		fmt.Fprintln(w, strings.Join(g, " · "))
	}
}
