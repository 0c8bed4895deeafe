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
