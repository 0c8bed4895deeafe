package tasks

// serveFencing stops the trees of the tasks the store reports taken over,
// until it closes the channel.
func (e *Engine) serveFencing(f Fencing) {
	for id := range f.TakenOver() {
		if lt := e.getLive(id); lt != nil {
			e.fence(lt, ErrFenced)
		}
	}
}

// fence stops the tree of a task this process no longer runs, once however
// many times it is told (by Fencing, by recovery, by each write the store
// refuses): its executor is cancelled (the kill ladder runs on its tree;
// what it writes then is refused too, and the run is not ended here: the
// task is its new runner's), its subscribers' streams end, and the task is
// no longer live here. A later read follows it through the store, as any
// replica's.
func (e *Engine) fence(lt *liveTask, cause error) {
	if lt.fenced.CompareAndSwap(false, true) {
		e.stopFenced(lt, cause)
	}
}

// stopFenced does fence's work, for the one caller that marked lt fenced.
func (e *Engine) stopFenced(lt *liveTask, cause error) {
	id := lt.snapshot().ID
	e.log.Error("task taken over by another replica: stopping its tree, writing nothing more to it", "task_id", string(id), "err", cause)
	if lt.cancelExec != nil {
		lt.cancelExec(cause)
	}
	lt.end()
	e.mu.Lock()
	if e.live[id] == lt {
		delete(e.live, id)
	}
	e.mu.Unlock()
}
