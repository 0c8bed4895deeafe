package agent

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// frames records what a textStream sends.
type frames struct {
	mu   sync.Mutex
	sent []sentText
}

type sentText struct {
	step int
	text string
	at   time.Time
}

func (f *frames) send(step int, text string) {
	f.mu.Lock()
	f.sent = append(f.sent, sentText{step, text, time.Now()})
	f.mu.Unlock()
}

func (f *frames) all() []sentText {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentText(nil), f.sent...)
}

// TestTextStreamCoalesces: the first piece goes up at once; the pieces that
// follow within the interval go up together at its end, in order; a new
// step's first piece sends what the step before held; Flush sends the rest.
// Time is synctest's.
func TestTextStreamCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f frames
		s := newTextStream(f.send)
		start := time.Now()
		s.Text(1, "a")
		if got := f.all(); len(got) != 1 || got[0].text != "a" || !got[0].at.Equal(start) {
			t.Fatalf("first piece: %+v", got)
		}
		for _, p := range []string{"b", "c", "d"} {
			time.Sleep(time.Millisecond)
			s.Text(1, p)
		}
		if got := f.all(); len(got) != 1 {
			t.Fatalf("pieces within the interval sent at once: %+v", got)
		}
		time.Sleep(textInterval)
		synctest.Wait()
		got := f.all()
		if len(got) != 2 || got[1].text != "bcd" || got[1].at.Sub(start) != textInterval {
			t.Fatalf("coalesced: %+v", got)
		}
		s.Text(1, "e")
		s.Text(2, "x") // a new step: the held "e" goes first
		s.Text(2, "y")
		s.Flush()
		var texts []string
		for _, g := range f.all() {
			texts = append(texts, g.text)
		}
		if strings.Join(texts, "|") != "a|bcd|e|x|y" && strings.Join(texts, "|") != "a|bcd|e|xy" {
			t.Fatalf("frames %q", texts)
		}
		if g := f.all(); g[len(g)-1].step != 2 || g[2].step != 1 {
			t.Errorf("steps %+v", g)
		}
		time.Sleep(time.Second) // no timer left to fire
		synctest.Wait()
	})
}

// TestTextStreamBounded: a model that floods is held to the rate and the
// step's cap: what is over is dropped (never split inside a character), and
// the step sends nothing more; the next step starts afresh.
func TestTextStreamBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f frames
		s := newTextStream(f.send)
		s.rate, s.burst, s.tokens = 100, 10, 10
		s.Text(1, "0123456é89abc") // 14 bytes, é at 7-8, against a bucket of 10
		s.Text(1, "more")
		s.Flush()
		got := f.all()
		if len(got) != 1 || got[0].text != "0123456é8" {
			t.Fatalf("flood: %+v", got)
		}
		time.Sleep(time.Second) // the bucket refills
		s.Text(1, "cut")
		s.Flush()
		if got := f.all(); len(got) != 1 {
			t.Fatalf("a cut step sent more: %+v", got)
		}
		s.stepMax = 5
		s.Text(2, "abc")
		s.Text(2, "defg") // over the step's cap
		s.Flush()
		got = f.all()
		if len(got) != 2 || got[1].text != "abc" || got[1].step != 2 {
			t.Fatalf("step cap: %+v", got)
		}
	})
}
