// Command treechild is the teardown benchmark's uncooperative subagent: it
// ignores SIGTERM and ctrl/cancel (only SIGKILL ends it) but otherwise speaks
// agentd's child protocol. The root of a tree (depth 0) spawns
// BENCH_TREE_SIZE-1 async children through the subagent.spawn self-tool; every
// process then reports one loop/event and answers ctrl/ping until it is
// killed. The supervisor re-execs it as Config.Executable.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/agentd/agentd/api"
)

// EnvTreeSize is how many processes the tree holds, the root included.
const EnvTreeSize = "BENCH_TREE_SIZE"

func main() { os.Exit(run()) }

func run() int {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return 1
	}
	if os.Getenv(api.EnvSupervisorPID) != strconv.Itoa(os.Getppid()) {
		return 137
	}
	signal.Ignore(syscall.SIGTERM)
	w := api.NewFrameWriter(os.Stdout, 0)
	r := api.NewFrameReader(os.Stdin, 0)
	if err := w.Send(api.MethodReady, 0, api.Ready{PID: os.Getpid()}); err != nil {
		return 1
	}
	f, err := r.Read()
	if err != nil || f.Method != api.MethodSpawn {
		return 1
	}
	var p api.SpawnPayload
	if err := api.DecodeParams(f, &p); err != nil {
		return 1
	}
	if p.Depth == 0 {
		size, _ := strconv.Atoi(os.Getenv(EnvTreeSize))
		if err := spawnChildren(w, r, size-1); err != nil {
			fmt.Fprintln(os.Stderr, "treechild:", err)
			return 1
		}
	}
	if err := w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventModel, UsageDelta: api.Usage{Steps: 1}}); err != nil {
		return 1
	}
	for {
		f, err := r.Read()
		if err != nil {
			return 1
		}
		if f.Method == api.MethodPing {
			var pg api.Ping
			_ = api.DecodeParams(f, &pg)
			_ = w.Send(api.MethodPong, 0, pg)
		}
		// ctrl/cancel is ignored on purpose.
	}
}

// spawnChildren asks for n async children, one tool call at a time.
func spawnChildren(w *api.FrameWriter, r *api.FrameReader, n int) error {
	args, err := json.Marshal(api.SpawnArgs{
		Contract:    api.OutputContract{Objective: "hold until killed", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Disposition: api.DispositionAsync,
	})
	if err != nil {
		return err
	}
	for id := uint64(1); id <= uint64(n); id++ {
		if err := w.Send(api.MethodToolCall, id, api.ToolCall{Tool: api.ToolSpawn, Args: args}); err != nil {
			return err
		}
		for {
			f, err := r.Read()
			if err != nil {
				return err
			}
			if !f.IsResponse() || f.ID != id {
				continue
			}
			var res api.ToolResult
			if f.Error != nil || json.Unmarshal(f.Result, &res) != nil || res.IsError {
				return fmt.Errorf("spawn %d refused: %s", id, f.Result)
			}
			break
		}
	}
	return nil
}
