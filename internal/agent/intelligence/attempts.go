package intelligence

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// attempts is what the HTTP dialects share of one model call: each attempt
// under its own timeout; a failed one tried again after the wait retryWait
// names, while retries last, unless part of the answer has already been
// streamed (the text would reach the caller twice) or the wait would pass
// ctx's deadline; a failure for good logged at warn with the endpoint and
// the model.
type attempts struct {
	log       *slog.Logger
	endpoint  string
	model     string
	timeout   time.Duration
	retries   int
	retryWait func(err error, attempt int) (time.Duration, bool)
	final     func(err error, attempt int) error // the error of the call that failed for good
}

// run calls try until it succeeds or the call fails for good. emitted
// reports whether any of the answer's text has reached the caller. An error
// after ctx ended is ctx's cause.
func run[T any](ctx context.Context, a attempts, emitted func() bool, try func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, a.timeout)
		v, err := try(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return zero, context.Cause(ctx)
		}
		if timedOut {
			// ctx is live, so the attempt's own timeout ended it.
			err = fmt.Errorf("no answer within the request timeout of %s: %w", a.timeout, err)
		}
		if emitted() {
			return zero, a.failed(fmt.Errorf("%w (not retried: part of the answer was already streamed)", a.final(err, attempt)))
		}
		wait, retryable := a.retryWait(err, attempt)
		if !retryable || attempt >= a.retries {
			return zero, a.failed(a.final(err, attempt))
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return zero, a.failed(fmt.Errorf("%w (the next retry, in %s, would pass the deadline)", a.final(err, attempt), wait.Round(time.Millisecond)))
		}
		a.log.Info("model request failed: retrying", "endpoint", a.endpoint, "attempt", attempt+1, "retry_in", wait.Round(time.Millisecond), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return zero, context.Cause(ctx)
		}
	}
}

// failed logs a call that failed for good and returns its error.
func (a attempts) failed(err error) error {
	a.log.Warn("model request failed", "endpoint", a.endpoint, "model", a.model, "err", err)
	return err
}
