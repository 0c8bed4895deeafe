package tasks

import (
	"errors"

	"github.com/a2aproject/a2a-go/a2a"
)

// ErrFenced is wrapped by a store's refusal to write a task this process no
// longer runs: another process took it over (this one's lease had lapsed,
// and the task was claimed as an orphan). The engine then stops the task's
// tree and forgets the task: its new runner resolves it.
var ErrFenced = errors.New("tasks: the task was taken over by another replica")

// Fencing is implemented by a Shared store (safe for concurrent use) that
// tells a process which of its
// tasks another process took over while its lease had lapsed, so that their
// trees stop before their next write is refused.
type Fencing interface {
	// TakenOver delivers the ids of this process's tasks that another
	// process took over; it is closed when the store is.
	TakenOver() <-chan a2a.TaskID
}

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
