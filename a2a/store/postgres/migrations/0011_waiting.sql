-- The record of a task's tree while its question waits for the caller's
-- answer (tasks.WaitingKeeper: api.WaitingTree as JSON), NULL otherwise.
-- (Numbered 0010 beside the migrations of other work.)
ALTER TABLE tasks ADD COLUMN waiting bytea;
