-- agentd's PostgreSQL store, schema version 5: a webhook registered for a
-- task is announced (at commit) to the replicas, so that the one running
-- the task learns of it without reading push_configs at every event
-- (tasks.PushWatcher).
CREATE FUNCTION agentd_push_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('agentd_push', NEW.task_id);
	RETURN NULL;
END $$;
CREATE TRIGGER push_configs_notify AFTER INSERT ON push_configs FOR EACH ROW EXECUTE FUNCTION agentd_push_notify();

-- The task counts (schema 1 and 4) in 64 shards, and a change counted in
-- the shard of the connection that makes it (agentd.count_shard, a
-- run-time parameter each connection of a replica sets to a shard of its
-- own) rather than the task's: the shard row's lock is held until the
-- commit, and two writers of one replica, one of them waiting for its
-- commit's flush, would otherwise queue on the shards their tasks share.
-- A shard is any part of the sums; connections without the parameter
-- (operators' tools) count in the task's shard.
INSERT INTO task_count (shard, n, bytes) SELECT g, 0, 0 FROM generate_series(16, 63) g;
CREATE OR REPLACE FUNCTION agentd_task_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	s int := nullif(current_setting('agentd.count_shard', true), '')::int & 63;
BEGIN
	IF TG_OP = 'INSERT' THEN
		UPDATE task_count SET n = n + 1, bytes = bytes + NEW.size WHERE shard = coalesce(s, hashtext(NEW.id) & 63);
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE task_count SET n = n - 1, bytes = bytes - OLD.size WHERE shard = coalesce(s, hashtext(OLD.id) & 63);
	ELSE
		UPDATE task_count SET bytes = bytes + NEW.size - OLD.size WHERE shard = coalesce(s, hashtext(NEW.id) & 63);
	END IF;
	RETURN NULL;
END $$;
