-- agentd's PostgreSQL store, schema version 1: the tables of the embedded
-- store (tasks, webhooks, pending push deliveries, stored distillates) plus
-- the replicas' leases, and the notifications that carry task changes and
-- cancel requests between replicas.
CREATE TABLE tasks (
	seq         bigserial UNIQUE,
	id          text PRIMARY KEY,
	owner       text NOT NULL,
	message_id  text,
	context_id  text NOT NULL,
	state       text NOT NULL,
	updated_ns  bigint NOT NULL,
	created_ns  bigint NOT NULL,
	finished_ns bigint,
	runner      text NOT NULL,
	payload     bytea,
	snapshot    bytea NOT NULL
);
CREATE UNIQUE INDEX tasks_message ON tasks (owner, message_id) WHERE message_id IS NOT NULL;
CREATE INDEX tasks_order ON tasks (updated_ns DESC, id DESC);
CREATE INDEX tasks_owner_order ON tasks (owner, updated_ns DESC, id DESC);
CREATE INDEX tasks_finished ON tasks (finished_ns) WHERE finished_ns IS NOT NULL;
CREATE INDEX tasks_unfinished ON tasks (created_ns) WHERE finished_ns IS NULL;

-- The number of tasks, in 16 shards kept by a trigger, so that replicas
-- creating tasks at once do not queue on one row.
CREATE TABLE task_count (shard int PRIMARY KEY, n bigint NOT NULL);
INSERT INTO task_count SELECT g, 0 FROM generate_series(0, 15) g;
CREATE FUNCTION agentd_task_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		UPDATE task_count SET n = n + 1 WHERE shard = hashtext(NEW.id) & 15;
	ELSE
		UPDATE task_count SET n = n - 1 WHERE shard = hashtext(OLD.id) & 15;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER tasks_count AFTER INSERT OR DELETE ON tasks FOR EACH ROW EXECUTE FUNCTION agentd_task_count();

-- Every change of a task is announced (at commit) to the replicas that
-- stream it.
CREATE FUNCTION agentd_task_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('agentd_task', NEW.id);
	RETURN NULL;
END $$;
CREATE TRIGGER tasks_notify AFTER UPDATE OF snapshot ON tasks FOR EACH ROW EXECUTE FUNCTION agentd_task_notify();

CREATE TABLE push_configs (
	task_id   text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	config_id text NOT NULL,
	seq       bigint NOT NULL,
	version   text NOT NULL,
	config    bytea NOT NULL,
	PRIMARY KEY (task_id, config_id)
);

CREATE TABLE push_pending (
	seq      bigserial PRIMARY KEY,
	task_id  text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	runner   text NOT NULL,
	snapshot bytea NOT NULL,
	event    bytea NOT NULL,
	final    boolean NOT NULL
);
CREATE INDEX push_pending_task ON push_pending (task_id);

CREATE TABLE blobs (
	id         text PRIMARY KEY,
	owner      text NOT NULL,
	run_id     text NOT NULL,
	media_type text NOT NULL,
	size       bigint NOT NULL,
	created_ns bigint NOT NULL,
	expires_ns bigint,
	content    bytea NOT NULL
);
CREATE INDEX blobs_owner ON blobs (owner);

-- One row per live replica (store instance), its heartbeat renewed while it
-- lives: a task whose runner's heartbeat is older than the lease is an
-- orphan, which any replica may claim.
CREATE TABLE leases (
	instance  text PRIMARY KEY,
	heartbeat timestamptz NOT NULL,
	started   timestamptz NOT NULL
);
