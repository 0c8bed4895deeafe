-- agentd's PostgreSQL store, schema version 7: a new task evicts the
-- finished tasks of callers over their fair share, not only over their
-- quota (issue 28: eight callers within a quota of an eighth of the store
-- filled it, and a ninth that held nothing was refused for up to the
-- retention). A caller's fair share is the store's bounds divided by the
-- callers holding tasks, the new task's caller counted, and never more than
-- the quota (package internal/budget); the shares are counted once, when
-- the caller's own finished tasks are gone and the store is still full.
-- Everything else is as in schema 4 (agentd_make_room) and 6
-- (agentd_make_room_n).
CREATE OR REPLACE FUNCTION agentd_make_room(p_owner text, p_id text, p_size bigint, p_capacity bigint, p_bytes bigint,
		p_quota_tasks bigint, p_quota_bytes bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	no_quota boolean := p_quota_tasks >= p_capacity AND p_quota_bytes >= p_bytes;
	growth boolean := p_size < 0;
	need bigint := 1;
	held bigint;
	held_bytes bigint;
	callers bigint;
	share_tasks bigint;
	share_bytes bigint;
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
				IF share_tasks IS NULL THEN
					SELECT greatest(count(DISTINCT owner) + CASE WHEN bool_or(owner = p_owner) THEN 0 ELSE 1 END, 1) INTO callers FROM tasks;
					share_tasks := least(p_quota_tasks, p_capacity / callers);
					share_bytes := least(p_quota_bytes, p_bytes / callers);
				END IF;
				DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner <> p_owner AND finished_ns IS NOT NULL AND owner IN
					(SELECT owner FROM tasks GROUP BY owner HAVING count(*) > share_tasks OR sum(size) > share_bytes)
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

CREATE OR REPLACE FUNCTION agentd_make_room_n(p_owner text, p_ids text[], p_size bigint, p_need bigint, p_capacity bigint, p_bytes bigint,
		p_quota_tasks bigint, p_quota_bytes bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	no_quota boolean := p_quota_tasks >= p_capacity AND p_quota_bytes >= p_bytes;
	held bigint;
	held_bytes bigint;
	callers bigint;
	share_tasks bigint;
	share_bytes bigint;
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
				IF share_tasks IS NULL THEN
					SELECT greatest(count(DISTINCT owner) + CASE WHEN bool_or(owner = p_owner) THEN 0 ELSE 1 END, 1) INTO callers FROM tasks;
					share_tasks := least(p_quota_tasks, p_capacity / callers);
					share_bytes := least(p_quota_bytes, p_bytes / callers);
				END IF;
				DELETE FROM tasks WHERE seq = (SELECT seq FROM tasks WHERE owner <> p_owner AND finished_ns IS NOT NULL AND owner IN
					(SELECT owner FROM tasks GROUP BY owner HAVING count(*) > share_tasks OR sum(size) > share_bytes)
					ORDER BY finished_ns, seq LIMIT 1 FOR UPDATE SKIP LOCKED);
			END IF;
		END IF;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'the store is full' USING ERRCODE = 'AG003';
		END IF;
	END LOOP;
END $$;
