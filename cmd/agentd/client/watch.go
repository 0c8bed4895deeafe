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
// snapshot stream (GET /ui/events, the operator's) and draws each snapshot
// (treeView). On a terminal it clears the screen and redraws, and redraws
// the last snapshot every second besides (watchTick), so its ages go on
// ("last event 12s ago" on a quiet child, deadlines counting down) between
// snapshots, which the service sends only on a change; otherwise it prints
// each snapshot once, each followed by a blank line, and nothing between
// them (a log or a pipe gets no repeats). It returns when the stream ends
// (the service stopped: nil), or ctx does.
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
	v := &treeView{w: stdout, base: base, tty: cli.IsTerminal(stdout), now: time.Now}
	// The reader hands each snapshot over; it ends when the stream does,
	// or when ctx ends (the request's context: its body's reads fail).
	events := make(chan *console.Event)
	errc := make(chan error, 1)
	stop := make(chan struct{}) // closed when the drawing ends
	go func() {
		errc <- readSSE(resp.Body, func(event, data string) error {
			if event != console.EventName {
				return nil
			}
			ev := &console.Event{}
			if err := json.Unmarshal([]byte(data), ev); err != nil {
				return fmt.Errorf("watch: a snapshot that does not decode: %w", err)
			}
			select {
			case events <- ev:
				return nil
			case <-stop:
				return errWatchStopped
			}
		})
	}()
	var tick <-chan time.Time
	if v.tty {
		t := time.NewTicker(watchTick)
		defer t.Stop()
		tick = t.C
	}
loop:
	for {
		select {
		case ev := <-events:
			if err = v.snapshot(ev); err != nil {
				break loop
			}
		case <-tick:
			if err = v.tick(); err != nil {
				break loop
			}
		case err = <-errc:
			errc = nil
			break loop
		}
	}
	close(stop)
	resp.Body.Close() // a write that failed leaves the reader blocked on the stream
	if errc != nil {
		<-errc
	}
	if ctx.Err() != nil {
		return nil // interrupted or --timeout: the watch is over
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "agentd: the tree stream ended (the service stopped serving)")
	return nil
}

// errWatchStopped ends the stream's reader when the drawing has ended.
var errWatchStopped = errors.New("client: the watch stopped drawing")

// watchTick is how often a terminal's watch redraws the last snapshot.
const watchTick = time.Second

// treeView draws the snapshots of a watch. Ages are drawn at the server's
// clock: a snapshot's own time (ev.At) when it arrives, advanced by the
// local time passed since it arrived (now) on each tick, so a skew between
// the two clocks does not show. It is used by one goroutine.
type treeView struct {
	w    io.Writer
	base string
	tty  bool             // a terminal: clear and redraw, and tick
	now  func() time.Time // the local clock
	last *console.Event   // the last snapshot drawn
	got  time.Time        // when it arrived, by now
}

// snapshot draws a new snapshot.
func (v *treeView) snapshot(ev *console.Event) error {
	v.last, v.got = ev, v.now()
	return v.draw(ev.At)
}

// tick redraws the last snapshot with its ages advanced to now; nothing off
// a terminal, or before the first snapshot.
func (v *treeView) tick() error {
	if !v.tty || v.last == nil {
		return nil
	}
	return v.draw(v.last.At.Add(v.now().Sub(v.got)))
}

func (v *treeView) draw(at time.Time) error {
	var b strings.Builder
	if v.tty {
		b.WriteString("\x1b[H\x1b[2J") // home, clear
	}
	printSnapshot(&b, v.last, v.base, at)
	if !v.tty {
		b.WriteString("\n") // a blank line ends each snapshot
	}
	_, err := io.WriteString(v.w, b.String())
	return err
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

// printSnapshot draws one snapshot at the time now (the server's clock:
// its ages are measured to now): the tree as `ctl a2a.Tree` prints it, the
// subagents that ended lately and the gauges.
func printSnapshot(w io.Writer, ev *console.Event, base string, now time.Time) {
	s := &ev.Snapshot
	fmt.Fprintf(w, "agentd %s at %s\n", base, now.Local().Format("15:04:05"))
	printTree(w, &s.TreeResult, now)
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
				e.Usage.Tokens(), now.Sub(e.EndedAt).Round(time.Second))
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
