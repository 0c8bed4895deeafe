package agent

import (
	"sync"
	"time"
	"unicode/utf8"
)

// Streamer receives the model's text as it is produced (the model's
// Request.OnText), step by step. Text must not block for long: it is called
// from the model call's goroutine. Flush is called when a step's model call
// has returned, before anything else of the step is reported, and sends what
// is still held.
type Streamer interface {
	Text(step int, chunk string)
	Flush()
}

// Text stream bounds. A chatty model (or a hostile endpoint) cannot flood the
// supervisor: text goes up in at most one frame per textInterval, at most
// textRate bytes a second after a burst of textBurst, and at most
// textStepMax bytes a step; text past the bounds is dropped (the result's
// distillate has the answer whole, and the binding shows it at the end).
const (
	textInterval = 10 * time.Millisecond
	textRate     = 64 << 10
	textBurst    = 64 << 10
	textStepMax  = 1 << 20
)

// textStream is the child's Streamer: it coalesces a step's text into
// EventText frames sent with send. The first piece after a quiet spell goes
// up at once (the first token's latency is one frame write); pieces that
// follow within textInterval wait for the interval's end and go up together.
// It is safe for concurrent use.
type textStream struct {
	send func(step int, text string) // writes one frame
	// interval, rate, burst and stepMax are the bounds (the text* constants
	// outside tests).
	interval    time.Duration
	rate, burst float64
	stepMax     int
	mu          sync.Mutex // guards the fields below; held while a frame is sent, so frames go in order
	step        int
	buf         []byte
	stepBytes   int  // bytes of the step taken (sent or held)
	cut         bool // the step went over a bound: the rest of its text is dropped
	last        time.Time
	tokens      float64 // the rate's bucket, in bytes
	filled      time.Time
	timer       *time.Timer
}

func newTextStream(send func(step int, text string)) *textStream {
	return &textStream{send: send, interval: textInterval, rate: textRate, burst: textBurst, stepMax: textStepMax, tokens: textBurst}
}

// Text takes a piece of step's text.
func (s *textStream) Text(step int, chunk string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if step != s.step {
		s.flushLocked()
		s.step, s.stepBytes, s.cut = step, 0, false
	}
	if s.cut || chunk == "" {
		return
	}
	if s.stepBytes+len(chunk) > s.stepMax {
		s.cut = true
		return
	}
	s.stepBytes += len(chunk)
	s.buf = append(s.buf, chunk...)
	now := time.Now()
	wait := s.interval - now.Sub(s.last)
	if wait <= 0 {
		s.flushLocked()
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(wait, s.tick)
	}
}

// Flush sends the text still held.
func (s *textStream) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *textStream) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	s.flushLocked()
}

// flushLocked sends the held text, within the rate: what the bucket cannot
// pay for is dropped, and the step is cut.
func (s *textStream) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if len(s.buf) == 0 {
		return
	}
	now := time.Now()
	if !s.filled.IsZero() {
		s.tokens = min(s.burst, s.tokens+s.rate*now.Sub(s.filled).Seconds())
	}
	s.filled = now
	text := s.buf
	if n := int(s.tokens); len(text) > n {
		for n > 0 && !utf8.RuneStart(text[n]) {
			n-- // never split a character
		}
		text = text[:n]
		s.cut = true
	}
	s.buf = s.buf[:0]
	if len(text) == 0 {
		return
	}
	s.tokens -= float64(len(text))
	s.last = now
	s.send(s.step, string(text))
}
