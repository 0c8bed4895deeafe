-- Schema version 6: what each task's tree did, step by step (model calls,
-- tool calls, each subagent's start and end: tasks.StepStore), for the
-- console's task page. A tree's steps are bounded by the recorder's byte
-- budget and are deleted with their task.
CREATE TABLE steps (
	task_id TEXT NOT NULL,       -- the root task
	seq     INTEGER NOT NULL,    -- from 1, in the order they were heard
	kind    TEXT NOT NULL,
	body    BLOB NOT NULL,       -- the api.Step JSON
	PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER steps_delete AFTER DELETE ON tasks BEGIN DELETE FROM steps WHERE task_id = OLD.id; END;
