package supervisor

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// TestFrameStreamReads: theFramePoller decodes a child's control-out as
// api.FrameReader does, across reads of any size: every frame in order,
// one kept while p.frames is full (the pipe left alone until there is
// room, backpressure on the child), and at the end p.readErr then
// p.frames closed: io.EOF between frames, io.ErrUnexpectedEOF inside one,
// api.ErrFrameTooLarge for a frame over the limit.
func TestFrameStreamReads(t *testing.T) {
	frames := func(n int) []byte {
		var b bytes.Buffer
		w := api.NewFrameWriter(&b, 0)
		for i := range n {
			if err := w.Send(api.MethodEvent, 0, api.LoopEvent{Step: i, Kind: api.EventStep}); err != nil {
				t.Fatal(err)
			}
		}
		return b.Bytes()
	}
	for _, tc := range []struct {
		name  string
		bytes []byte
		chunk int // bytes a write
		want  int // frames
		err   error
	}{
		{"whole writes", frames(40), 1 << 16, 40, io.EOF},
		{"a byte a write", frames(5), 1, 5, io.EOF},
		{"ends inside a frame", append(frames(3), frames(1)[:7]...), 3, 3, io.ErrUnexpectedEOF},
		{"over the limit", append(frames(2), 0, 1, 0, 0), 64, 2, api.ErrFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, theirs, err := controlOutPipe()
			if err != nil {
				t.Fatal(err)
			}
			p := &proc{frames: make(chan *api.Frame, 2), stop: make(chan struct{})}
			if err := p.readFrames(ours, 1<<10); err != nil {
				t.Fatal(err)
			}
			defer p.out.close()
			w := os.NewFile(uintptr(theirs), "control-out")
			go func() {
				defer w.Close()
				for b := tc.bytes; len(b) > 0; b = b[min(tc.chunk, len(b)):] {
					if _, err := w.Write(b[:min(tc.chunk, len(b))]); err != nil {
						return
					}
				}
			}()
			got := 0
			timeout := time.After(10 * time.Second)
			for {
				select {
				case f, ok := <-p.frames:
					if !ok {
						if got != tc.want || !errors.Is(p.readErr, tc.err) {
							t.Fatalf("%d frames, then %v; want %d, then %v", got, p.readErr, tc.want, tc.err)
						}
						return
					}
					var ev api.LoopEvent
					if err := api.DecodeParams(f, &ev); err != nil || ev.Step != got {
						t.Fatalf("frame %d: step %d, %v", got, ev.Step, err)
					}
					got++
				case <-timeout:
					t.Fatalf("%d frames within 10s, and no end", got)
				}
			}
		})
	}
}
