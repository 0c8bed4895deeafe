-- Schema version 8: what each task's tree did, step by step (model calls,
-- tool calls, each subagent's start and end: tasks.StepStore), for the
-- console's task page on any replica. A tree's steps are bounded by the
-- recorder's byte budget and are deleted with their task.
CREATE TABLE steps (
	task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, -- the root task
	seq     bigint NOT NULL,   -- from 1, in the order they were heard
	kind    text NOT NULL,
	body    bytea NOT NULL,    -- the api.Step JSON
	PRIMARY KEY (task_id, seq)
);
