-- agentd's PostgreSQL store, schema version 6: a task's change is
-- announced only to the replicas that watch it, and the fence runs only
-- for a write it may refuse.

-- A replica that follows a task another one runs (a stream, a blocking
-- send, a cancel waiting for the end: tasks.Shared's Watch) holds a row
-- here while it watches. It commits the row in a transaction that also
-- locks the task's row (FOR SHARE) before it reads the task: a write of the
-- task that held the row first has committed by then (the read sees it),
-- and one that takes the row after finds the watcher (the trigger's query
-- sees what committed before it ran, read committed). A task nobody
-- watches is announced to no one: a NOTIFY costs its commit PostgreSQL's
-- lock on the notification queue, held until the commit is flushed (the
-- commits that notify go one at a time), and it wakes every replica's
-- listener. The rows of a replica whose lease expired are deleted by the
-- others (at their heartbeat); a stale row costs announcements only.
CREATE TABLE task_watchers (
	id       text PRIMARY KEY,
	task_id  text NOT NULL,
	instance text NOT NULL
);
CREATE INDEX task_watchers_task ON task_watchers (task_id);
CREATE INDEX task_watchers_instance ON task_watchers (instance);

CREATE OR REPLACE FUNCTION agentd_task_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM task_watchers WHERE task_id = NEW.id) THEN
		PERFORM pg_notify('agentd_task', NEW.id);
	END IF;
	RETURN NULL;
END $$;

-- The fence (schema 2) changes nothing of a write by the task's runner, or
-- by a connection without agentd.instance (operators' tools): the trigger
-- runs for the others alone, and for a change of runner (a takeover, whose
-- epoch it raises).
DROP TRIGGER tasks_fence ON tasks;
CREATE TRIGGER tasks_fence BEFORE UPDATE ON tasks FOR EACH ROW
	WHEN (NEW.runner IS DISTINCT FROM OLD.runner
		OR coalesce(current_setting('agentd.instance', true), '') NOT IN ('', OLD.runner))
	EXECUTE FUNCTION agentd_task_fence();
