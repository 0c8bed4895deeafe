// The durable state of issue 16 under the scenarios of its review: replicas
// through A2A 1.0, one message racing on two replicas, answered sends across
// a SIGKILL, ListTasks pages while tasks arrive.

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// A task sent through replica A with A2A 1.0 is read, followed, cancelled
// and given a webhook through replica B with 1.0's methods, and followed
// through B with 0.3's resubscribe.
func TestReplicasProtocol10(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	script := writeScript(t, "[depth 0]\nsleep 1500ms\nanswer \"done: {objective}\"\n")
	a := replica(t, dsn, "--intelligence", "builtin:script="+script)
	b := replica(t, dsn, "--intelligence", "builtin:script="+script)
	first := sendV1(t, a, "first", "")
	var got struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if e := rpc(t, b, "1.0", "GetTask", `{"id":"`+first+`"}`, &got); e != nil || got.ID != first {
		t.Fatalf("GetTask through B: %+v %+v", got, e)
	}
	_, events := stream(t, b, "SubscribeToTask", `{"id":"`+first+`"}`, 100)
	if len(events) < 2 {
		t.Fatalf("SubscribeToTask through B: %d events", len(events))
	}
	if last := string(events[len(events)-1].Result); !strings.Contains(last, "TASK_STATE_COMPLETED") {
		t.Fatalf("SubscribeToTask through B ended with %s", last)
	}
	second := sendV1(t, a, "second", "")
	_, events = stream(t, b, "tasks/resubscribe", `{"id":"`+second+`"}`, 100)
	if len(events) < 2 || !strings.Contains(string(events[len(events)-1].Result), `"completed"`) {
		t.Fatalf("tasks/resubscribe through B: %d events", len(events))
	}
	third := sendV1(t, a, "third", "")
	testkit.WaitFor(t, 10*time.Second, "the third task working", func() bool {
		rpc(t, b, "1.0", "GetTask", `{"id":"`+third+`"}`, &got)
		return got.Status.State == "TASK_STATE_WORKING"
	})
	var created struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	if e := rpc(t, b, "1.0", "CreateTaskPushNotificationConfig", `{"taskId":"`+third+`","id":"cfg-1","url":"http://127.0.0.1:1/hook"}`, &created); e != nil || created.ID != "cfg-1" {
		t.Fatalf("CreateTaskPushNotificationConfig through B: %+v %+v", created, e)
	}
	var list struct {
		Configs []struct {
			ID string `json:"id"`
		} `json:"configs"`
	}
	if e := rpc(t, a, "1.0", "ListTaskPushNotificationConfigs", `{"task_id":"`+third+`"}`, &list); e != nil || len(list.Configs) != 1 {
		t.Fatalf("the config through A: %+v %+v", list, e)
	}
	if e := rpc(t, b, "1.0", "CancelTask", `{"id":"`+third+`"}`, &got); e != nil || got.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("CancelTask through B: %+v %+v", got, e)
	}
	if e := rpc(t, a, "1.0", "GetTask", `{"id":"`+third+`"}`, &got); e != nil || got.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("the cancelled task through A: %+v %+v", got, e)
	}
}

// One message sent to two replicas at the same moment, several times over
// (blocking and not): one task, one run.
func TestReplicasSameMessageAtOnce(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	a := replica(t, dsn, "--intelligence", "builtin:demo=200ms")
	b := replica(t, dsn, "--intelligence", "builtin:demo=200ms")
	clients := []*a2aclient.Client{a.client(t), b.client(t)}
	for round := range 5 {
		var wg sync.WaitGroup
		var ids sync.Map
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := textMessage("at once")
				m.Message.ID = fmt.Sprintf("together-%d", round)
				if i%2 == 0 {
					m = nonBlocking(m)
				}
				res, err := clients[i%2].SendMessage(context.Background(), m)
				if err != nil {
					t.Error(err)
					return
				}
				ids.Store(res.(*a2a.Task).ID, true)
			}()
		}
		wg.Wait()
		n := 0
		ids.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("round %d: six sends of one message through two replicas made %d tasks", round, n)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "five runs accepted", func() bool { return lineCount(a, "task accepted")+lineCount(b, "task accepted") >= 5 })
	if n := lineCount(a, "task accepted") + lineCount(b, "task accepted"); n != 5 {
		t.Fatalf("%d runs for five messages", n)
	}
}

// Sends answered while agentd is SIGKILLed mid-burst: every task a send was
// answered with is there after the restart, and none is left working; on
// the embedded store and on PostgreSQL.
func TestAcknowledgedSendsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		burstThenKill(t, func() *service {
			return startService(t, "--state-dir", dir, "--intelligence", "builtin:demo=20ms")
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.Start(t).Database(t)
		burstThenKill(t, func() *service { return replica(t, dsn, "--intelligence", "builtin:demo=20ms") })
	})
}

// burstThenKill sends from four goroutines (half of them blocking) until 200
// sends are answered, SIGKILLs the service, starts it again with start and
// checks that every answered task is there and ended.
func burstThenKill(t *testing.T, start func() *service) {
	t.Helper()
	s := start()
	c := s.client(t)
	var mu sync.Mutex
	var acked []a2a.TaskID
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := textMessage("burst")
				if i%2 == 0 {
					m = nonBlocking(m)
				}
				res, err := c.SendMessage(context.Background(), m)
				if err != nil {
					return // the service is gone
				}
				mu.Lock()
				acked = append(acked, res.(*a2a.Task).ID)
				mu.Unlock()
			}
		}()
	}
	testkit.WaitFor(t, 20*time.Second, "sends answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200
	})
	s.kill(t)
	close(stop)
	wg.Wait()
	s2 := start()
	c2 := s2.client(t)
	testkit.WaitFor(t, 10*time.Second, "every answered task there and ended", func() bool {
		for _, id := range acked {
			got, err := c2.GetTask(context.Background(), &a2a.TaskQueryParams{ID: id})
			if err != nil {
				t.Fatalf("task %s, answered before the kill: %v", id, err)
			}
			if !got.Status.State.Terminal() {
				return false
			}
		}
		return true
	})
	t.Logf("%d answered sends, all there", len(acked))
}

// ListTasks walked page by page while new tasks arrive: every task there
// before the walk is listed once, none twice.
func TestListTasksPagesUnderInserts(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:demo")
	c := s.client(t)
	before := map[string]bool{}
	for range 60 {
		res, err := c.SendMessage(context.Background(), textMessage("before"))
		if err != nil {
			t.Fatal(err)
		}
		before[string(res.(*a2a.Task).ID)] = true
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.SendMessage(context.Background(), nonBlocking(textMessage("during"))); err != nil {
				return
			}
		}
	}()
	seen := map[string]int{}
	token := ""
	for {
		var page struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			NextPageToken string `json:"nextPageToken"`
		}
		if e := rpc(t, s, "1.0", "ListTasks", fmt.Sprintf(`{"pageSize":7,"pageToken":%q}`, token), &page); e != nil {
			t.Fatalf("ListTasks: %+v", e)
		}
		for _, tk := range page.Tasks {
			seen[tk.ID]++
		}
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	close(stop)
	<-done
	for id, n := range seen {
		if n > 1 {
			t.Errorf("task %s listed %d times", id, n)
		}
	}
	for id := range before {
		if seen[id] != 1 {
			t.Errorf("task %s, there before the walk, listed %d times", id, seen[id])
		}
	}
}
