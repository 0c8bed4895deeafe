package client

import (
	"fmt"
	"io"
	"testing"

	"github.com/agentd/agentd/api"
)

// ctl's answering words become a2a.Answer's params: answer TASK TEXT (the
// words joined), approve TASK ("yes"), deny TASK [REASON] ("no: REASON" or
// "no"); questions takes --task; bad operands are usage errors.
func TestCtlAnswerOperands(t *testing.T) {
	to := []string{"--to", "http://127.0.0.1:1"}
	for _, c := range []struct {
		args   []string
		method string
		params string
	}{
		{[]string{"answer", "T1", "two", "words"}, api.OpAnswer, "map[answer:two words task_id:T1]"},
		{[]string{"a2a.Answer", "T1", "-5"}, api.OpAnswer, "map[answer:-5 task_id:T1]"},
		{[]string{"approve", "T1"}, api.OpAnswer, "map[answer:yes task_id:T1]"},
		{[]string{"Deny", "T1"}, api.OpAnswer, "map[answer:no task_id:T1]"},
		{[]string{"deny", "T1", "not", "today"}, api.OpAnswer, "map[answer:no: not today task_id:T1]"},
		{[]string{"questions"}, api.OpQuestions, "map[]"},
		{[]string{"questions", "--task", "T1"}, api.OpQuestions, "map[task_id:T1]"},
	} {
		args := append(append([]string{c.args[0]}, to...), c.args[1:]...)
		if c.args[0] == "questions" {
			args = append(c.args, to...)
		}
		cfg, err := parseCtl(args, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if cfg.Method != c.method || fmt.Sprint(cfg.Params) != c.params {
			t.Errorf("%v: %s %v, want %s %s", c.args, cfg.Method, cfg.Params, c.method, c.params)
		}
	}
	for _, bad := range [][]string{{"answer", "T1"}, {"answer"}, {"approve"}, {"approve", "T1", "extra"}, {"deny"}, {"questions", "T1"}} {
		if _, err := parseCtl(append(append([]string{bad[0]}, to...), bad[1:]...), io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
