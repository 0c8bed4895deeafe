package api

import "testing"

// CallerMaySet lets a caller set any key outside agentd/ and the agentd/
// keys agentd reads as input, and no other agentd/ key.
func TestCallerMaySet(t *testing.T) {
	for _, k := range []string{
		MetaDepth, MetaMaxDepth, MetaHops, MetaBudget, MetaProvider, MetaSkill, MetaPriority,
		"other", "traceparent", "Agentd/caller", "agentd", "",
	} {
		if !CallerMaySet(k) {
			t.Errorf("CallerMaySet(%q) = false", k)
		}
	}
	for _, k := range []string{
		MetaCaller, MetaCallerAuth, MetaStatus, MetaCause, MetaUsage, MetaAgentPath, MetaParentTask, MetaRunID, MetaStarted,
		MetaNestedUnrecorded, MetaDisposition, MetaKind, MetaWrapped, MetaOffloaded, MetaAttempt,
		MetaQueuePosition, MetaInterrupted, MetaInterruptions, DataKeyDelegation,
		MetaTrigger, MetaTriggerSession, MetaTriggerSeq, MetaTriggerAttempt, MetaTriggerTick,
		MetaTriggerMissed, MetaTriggerResource, MetaTriggerServer, MetaTriggerReason,
		ReservedPrefix, ReservedPrefix + "new_key",
	} {
		if CallerMaySet(k) {
			t.Errorf("CallerMaySet(%q) = true", k)
		}
	}
}
