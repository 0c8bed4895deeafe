-- agentd's PostgreSQL store, schema version 4: the store's byte bound and
-- per-caller quotas, as the embedded store keeps them (issue 15).

-- The bytes each task takes (its snapshot and retained payload), summed
-- beside the count in task_count's shards by the count trigger.
-- The migrating replica sizes every task, which the fence (schema 2) would
-- refuse for the tasks of other replicas: the fence is off for this
-- transaction (the setting is back at its end).
ALTER TABLE tasks ADD COLUMN size bigint NOT NULL DEFAULT 0;
SELECT set_config('agentd.instance', '', true);
UPDATE tasks SET size = octet_length(snapshot) + coalesce(octet_length(payload), 0);
ALTER TABLE task_count ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
UPDATE task_count c SET bytes = coalesce((SELECT sum(t.size) FROM tasks t WHERE hashtext(t.id) & 15 = c.shard), 0);
CREATE OR REPLACE FUNCTION agentd_task_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		UPDATE task_count SET n = n + 1, bytes = bytes + NEW.size WHERE shard = hashtext(NEW.id) & 15;
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE task_count SET n = n - 1, bytes = bytes - OLD.size WHERE shard = hashtext(OLD.id) & 15;
	ELSE
		UPDATE task_count SET bytes = bytes + NEW.size - OLD.size WHERE shard = hashtext(NEW.id) & 15;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER tasks_count_size AFTER UPDATE OF size ON tasks FOR EACH ROW
	WHEN (OLD.size IS DISTINCT FROM NEW.size) EXECUTE FUNCTION agentd_task_count();

-- A caller's own oldest finished task is the first to go.
CREATE INDEX tasks_owner_finished ON tasks (owner, finished_ns) WHERE finished_ns IS NOT NULL;

-- agentd_make_room evicts finished tasks, in the transaction that creates
-- (or grows) task p_id of p_owner taking p_size bytes, as the memory and
-- embedded stores' policy says: first within the caller's quota (its own
-- oldest finished tasks), then within the store's bounds (its own, then the
-- oldest finished tasks of callers over their quota, or anyone's when there
-- is no quota). It raises AG002 (the caller's quota holds only running
-- tasks, or the task alone is over it) or AG003 (nothing may go: the store
-- is full), and the rollback restores what it evicted. With p_size < 0 it
-- is the growth of a stored task: only the store's bounds are made good, as
-- far as finished tasks allow, and it never raises.
--
-- Concurrent creates of one caller (from any replica) take its advisory
-- lock (key space 7422017) until their commit, so that a quota is never
-- passed; the store's bounds are read from the committed shards and may be
-- passed by the creates in flight at once.
CREATE FUNCTION agentd_make_room(p_owner text, p_id text, p_size bigint, p_capacity bigint, p_bytes bigint,
		p_quota_tasks bigint, p_quota_bytes bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	no_quota boolean := p_quota_tasks >= p_capacity AND p_quota_bytes >= p_bytes;
	growth boolean := p_size < 0;
	need bigint := 1;
	held bigint;
	held_bytes bigint;
BEGIN
	IF growth THEN
		SELECT owner INTO p_owner FROM tasks WHERE id = p_id;
		IF NOT FOUND THEN
			RETURN;
		END IF;
		p_size := 0;
		need := 0;
	ELSE
		IF p_size > p_quota_bytes THEN
			RAISE EXCEPTION 'the task alone is % bytes, the quota %', p_size, p_quota_bytes USING ERRCODE = 'AG002';
		END IF;
		IF NOT no_quota THEN
			PERFORM pg_advisory_xact_lock(7422017, hashtext(p_owner));
			LOOP
				SELECT count(*), coalesce(sum(size), 0) INTO held, held_bytes FROM tasks WHERE owner = p_owner;
				EXIT WHEN held + 1 <= p_quota_tasks AND held_bytes + p_size <= p_quota_bytes;
				DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner = p_owner AND id <> p_id AND finished_ns IS NOT NULL
					ORDER BY finished_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED);
				IF NOT FOUND THEN
					RAISE EXCEPTION '% tasks, % bytes held (quota %, % bytes)', held, held_bytes, p_quota_tasks, p_quota_bytes USING ERRCODE = 'AG002';
				END IF;
			END LOOP;
		END IF;
	END IF;
	LOOP
		SELECT sum(n), sum(bytes) INTO held, held_bytes FROM task_count;
		EXIT WHEN held + need <= p_capacity AND held_bytes + p_size <= p_bytes;
		DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner = p_owner AND id <> p_id AND finished_ns IS NOT NULL
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
			IF growth THEN
				RETURN; -- over the bound until tasks finish or go
			END IF;
			RAISE EXCEPTION 'the store is full' USING ERRCODE = 'AG003';
		END IF;
	END LOOP;
END $$;
