package tasks

import "time"

// SetMemoryClock sets the clock a MemoryStore reads for retention (the
// conformance suite's test clock).
func SetMemoryClock(s *MemoryStore, now func() time.Time) { s.now = now }

// SetStartedHook sets f to run right after a new task's executor is
// started, before the send that started it is answered.
func SetStartedHook(e *Engine, f func()) { e.startedHook = func(*liveTask) { f() } }

// SetFollowedHook sets f to run right after a follow-up message joined its
// task, before the send that brought it is answered.
func SetFollowedHook(e *Engine, f func()) { e.followedHook = f }
