package tasks

import "time"

// SetMemoryClock sets the clock a MemoryStore reads for retention (the
// conformance suite's test clock).
func SetMemoryClock(s *MemoryStore, now func() time.Time) { s.now = now }
