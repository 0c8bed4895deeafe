package peer

import (
	"crypto/sha256"
	"fmt"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/supervisor/delegate"
)

// MessageID returns the messageId of the message a delegation sends: derived
// from the delegation's handle (the delegating task's id for a routed
// message, the child's for a spawn), its agent path and its turn (the
// objective and the number of seed slices it carries, which each follow-up
// turn changes), never random. A crash rerun or a client's retry of the same
// turn sends the same id, so a peer that keeps messageIds (agentd does, per
// caller) answers with the task it already has instead of running the work
// twice. It is a UUID (version 8, of a SHA-256).
func MessageID(req delegate.Request) string {
	return hashID("agentd/delegation/v1", req.Handle, req.Payload.AgentPath,
		strconv.Itoa(len(req.Payload.Seed.Slices)), req.Payload.Contract.Objective)
}

// AnswerID returns the messageId of the answer a delegation sends to its
// peer's question: derived from the delegation's handle, the remote task's
// id, the question's number in the delegation (from 1) and the question
// (its key: state and status message), never random. A resend of the same
// answer is the same message, which a peer that keeps messageIds (agentd
// does, in the task's history) takes once.
func AnswerID(handle string, task a2a.TaskID, n int, question string) string {
	return hashID("agentd/answer/v1", handle, string(task), strconv.Itoa(n), question)
}

// hashID is a UUID (version 8) of the SHA-256 of the length-prefixed parts.
func hashID(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	b := h.Sum(nil)[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
