// Package a2abind binds agentd's delegations to A2A: the AgentExecutor that
// turns an A2A message (plain, or another agentd's structured delegation)
// into a delegation and a delegation's end into Task events, the mapping
// between terminal statuses and task states (StateOf, ResultFromTask) and
// between distillates and artifacts, the agent card with the agentd contract
// extension, the contract itself (the delegation data part and the mesh
// metadata, both directions), and the TreeObserver that makes every nested
// subagent an A2A task too. Tasks are kept by package tasks; package peer
// sends delegations to remote A2A agents. docs/ARCHITECTURE.md describes the
// A2A mapping.
package a2abind
