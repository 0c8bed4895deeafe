package main

import (
	"context"
	"syscall"
	"testing"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// recordIn opens the state directory's store as one `agentd run --run-id
// x` does (a new instance each time) and returns its record; the store is
// closed by the returned func, which ends that instance (its lock released,
// as when the process exits).
func recordIn(t *testing.T, dir string, policy tasks.RecoverPolicy) (*runRecord, func()) {
	t.Helper()
	s, err := openSQLite(context.Background(), dir, storeLimits{}, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	var closed bool
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	return &runRecord{store: s, runID: "x", policy: policy, log: discardLog()}, func() { closed = true; s.Close() }
}

func signalledCtx(sig syscall.Signal) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(signalled{sig})
	return ctx
}

// A run drained on a signal is stored back submitted and interrupted; the
// next run with its id runs it again from its payload under --recover fail,
// its attempt unchanged; once that run has ended, the next prints it.
func TestRunRecordInterruptedRunsAgain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	req := supervisor.StartRequest{Payload: api.SpawnPayload{Contract: api.OutputContract{Objective: "the objective"}}}

	r, end := recordIn(t, dir, tasks.RecoverFail)
	if _, _, done, err := r.begin(ctx, req); done || err != nil {
		t.Fatalf("a new run: done %v, %v", done, err)
	}
	r.started(ctx, "x")
	r.drained(signalledCtx(syscall.SIGTERM), api.SubagentResult{Status: api.StatusCancelled, Detail: "supervisor draining", Distillate: api.InlineText("")})
	if st := r.task.Status.State; st.Terminal() || r.task.Metadata[api.MetaInterrupted] != true || len(r.task.Artifacts) != 0 {
		t.Fatalf("the drained record: %s %v, %d artifacts", st, r.task.Metadata, len(r.task.Artifacts))
	}
	end()

	for n := 1; n <= tasks.MaxAttempts+1; n++ {
		// Interrupted again and again: each re-trigger runs it (no attempt
		// is used up).
		r, end = recordIn(t, dir, tasks.RecoverFail)
		next, res, done, err := r.begin(ctx, supervisor.StartRequest{})
		if done || err != nil || next.Payload.Contract.Objective != "the objective" {
			t.Fatalf("re-trigger %d: done %v (%+v), %v, payload %+v", n, done, res, err, next.Payload)
		}
		m := r.task.Metadata
		if got, _ := tasks.MetaInt(m[api.MetaInterruptions]); m[api.MetaInterrupted] != false || got != n || tasks.Attempt(r.task) != 1 {
			t.Fatalf("re-trigger %d: metadata %v", n, m)
		}
		if n <= tasks.MaxAttempts {
			r.started(ctx, "x")
			r.drained(signalledCtx(syscall.SIGINT), api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText("")})
			end()
		}
	}
	r.finish(ctx, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done")})
	end()

	r, end = recordIn(t, dir, tasks.RecoverFail)
	defer end()
	_, res, done, err := r.begin(ctx, supervisor.StartRequest{})
	if !done || err != nil || res.Status != api.StatusCompleted || res.Distillate.Text() != "done" {
		t.Fatalf("after the rerun ended: done %v, %+v, %v", done, res, err)
	}
}

// drained records a result as it is when the root completed during the
// drain, or when no signal cancelled the run; and a run lost without a
// record of its interruption is still resolved by --recover.
func TestRunRecordDrainedEnds(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		res  api.SubagentResult
	}{
		{"completed during the drain", signalledCtx(syscall.SIGTERM), api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("made it")}},
		{"cancelled without a signal", cancelled, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("")}},
	} {
		dir := t.TempDir()
		r, end := recordIn(t, dir, tasks.RecoverFail)
		r.begin(ctx, supervisor.StartRequest{Payload: api.SpawnPayload{Contract: api.OutputContract{Objective: "o"}}})
		r.started(ctx, "x")
		r.drained(tc.ctx, tc.res)
		end()
		r, end = recordIn(t, dir, tasks.RecoverFail)
		_, res, done, err := r.begin(ctx, supervisor.StartRequest{})
		end()
		if !done || err != nil || res.Status != tc.res.Status {
			t.Fatalf("%s: done %v, %+v, %v", tc.name, done, res, err)
		}
	}
	// Killed mid-run (no record of an interruption): --recover fail.
	dir := t.TempDir()
	r, end := recordIn(t, dir, tasks.RecoverFail)
	r.begin(ctx, supervisor.StartRequest{Payload: api.SpawnPayload{Contract: api.OutputContract{Objective: "o"}}})
	r.started(ctx, "x")
	end()
	r, end = recordIn(t, dir, tasks.RecoverFail)
	defer end()
	_, res, done, err := r.begin(ctx, supervisor.StartRequest{})
	if !done || err != nil || res.Status != api.StatusCrashed || res.Cause != api.CauseSupervisorLost {
		t.Fatalf("killed mid-run: done %v, %+v, %v", done, res, err)
	}
}
