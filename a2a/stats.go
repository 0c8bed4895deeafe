package a2a

// TaskStates counts the stored tasks by state (the A2A 0.3 state names:
// submitted, working, completed, ...), for the tasks-by-state metric. It takes
// the store's lock once and walks every task: a scrape's cost, not a
// request's.
func (s *Store) TaskStates() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int)
	for _, st := range s.tasks {
		out[string(st.task.Status.State)]++
	}
	return out
}

// TaskStates counts the engine's stored tasks by state.
func (e *Engine) TaskStates() map[string]int { return e.store.TaskStates() }
