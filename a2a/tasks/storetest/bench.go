package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
)

// BenchSend measures what one message/send of an instant agent asks of a
// store: the task's first snapshot (Create), then its last (Put, completed
// with one artifact), from conc goroutines at once. The store holds
// preload finished tasks of the same caller before the clock starts.
func BenchSend(b *testing.B, s tasks.Store, preload, conc int) {
	const owner = "spiffe://bench.agentd.test/client"
	for i := range preload {
		sendTask(b, s, fmt.Sprintf("preload-%07d", i), owner)
	}
	var n atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				sendTask(b, s, fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), owner)
			}
		}()
	}
	wg.Wait()
}

// sendTask creates a task as a send does and completes it.
func sendTask(b *testing.B, s tasks.Store, id, owner string) {
	ts := time.Now().UTC()
	tid := a2a.TaskID(id)
	msg := &a2a.Message{ID: id, Role: a2a.MessageRoleUser, TaskID: tid, ContextID: "bench", Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}
	t := &a2a.Task{ID: tid, ContextID: "bench", History: []*a2a.Message{msg}, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts}}
	if err := s.Create(ctx, t, owner); err != nil {
		b.Error(err)
		return
	}
	done := *t
	end := time.Now().UTC()
	done.Artifacts = []*a2a.Artifact{{ID: a2a.ArtifactID(id + ".distillate"), Parts: a2a.ContentParts{a2a.TextPart{Text: "ok"}}}}
	done.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &end}
	if err := s.Put(ctx, &done); err != nil {
		b.Error(err)
	}
}
