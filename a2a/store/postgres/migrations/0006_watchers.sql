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

-- agentd_make_room_n is agentd_make_room (schema 4) for p_need new tasks of
-- one caller at once, p_ids, taking p_size bytes together: the writer's
-- batch makes room once for each caller's creates in it, not once a task
-- (each call sums the 64 count shards). A refusal is the batch's first
-- create of that caller's: the writer runs the others again without it,
-- then it alone (writer.go), so that every create is answered as it would
-- be alone.
CREATE FUNCTION agentd_make_room_n(p_owner text, p_ids text[], p_size bigint, p_need bigint, p_capacity bigint, p_bytes bigint,
		p_quota_tasks bigint, p_quota_bytes bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	no_quota boolean := p_quota_tasks >= p_capacity AND p_quota_bytes >= p_bytes;
	held bigint;
	held_bytes bigint;
BEGIN
	IF p_size > p_quota_bytes THEN
		RAISE EXCEPTION 'the tasks are % bytes, the quota %', p_size, p_quota_bytes USING ERRCODE = 'AG002';
	END IF;
	IF NOT no_quota THEN
		PERFORM pg_advisory_xact_lock(7422017, hashtext(p_owner));
		LOOP
			SELECT count(*), coalesce(sum(size), 0) INTO held, held_bytes FROM tasks WHERE owner = p_owner;
			EXIT WHEN held + p_need <= p_quota_tasks AND held_bytes + p_size <= p_quota_bytes;
			DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner = p_owner AND id <> ALL (p_ids) AND finished_ns IS NOT NULL
				ORDER BY finished_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED);
			IF NOT FOUND THEN
				RAISE EXCEPTION '% tasks, % bytes held (quota %, % bytes)', held, held_bytes, p_quota_tasks, p_quota_bytes USING ERRCODE = 'AG002';
			END IF;
		END LOOP;
	END IF;
	LOOP
		SELECT sum(n), sum(bytes) INTO held, held_bytes FROM task_count;
		EXIT WHEN held + p_need <= p_capacity AND held_bytes + p_size <= p_bytes;
		DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner = p_owner AND id <> ALL (p_ids) AND finished_ns IS NOT NULL
			ORDER BY finished_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED);
		IF NOT FOUND THEN
			IF no_quota THEN
				DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner <> p_owner AND finished_ns IS NOT NULL
					ORDER BY finished_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED);
			ELSE
				DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner <> p_owner AND finished_ns IS NOT NULL AND owner IN
					(SELECT owner FROM tasks GROUP BY owner HAVING count(*) > p_quota_tasks OR sum(size) > p_quota_bytes)
					ORDER BY finished_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED);
			END IF;
		END IF;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'the store is full' USING ERRCODE = 'AG003';
		END IF;
	END LOOP;
END $$;
