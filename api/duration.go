package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Duration is a time.Duration that travels in JSON as a Go duration string
// ("90s", "1m30s"). On input it also accepts a bare number of milliseconds.
// The zero value is a zero duration.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON decodes a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("api: bad duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return errors.New("api: a duration is a string like \"30s\" or a number of milliseconds")
	}
	if ms > float64(MaxDeadline/time.Millisecond) || ms < -float64(MaxDeadline/time.Millisecond) {
		return fmt.Errorf("api: duration of %v ms is out of range", ms)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}
