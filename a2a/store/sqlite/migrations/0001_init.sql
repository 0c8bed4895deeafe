-- agentd's embedded store, schema version 1: tasks with their snapshots,
-- webhooks, pending push deliveries and stored distillates.
CREATE TABLE tasks (
	id          TEXT PRIMARY KEY,
	owner       TEXT NOT NULL,       -- the caller that created it ('' for none)
	message_id  TEXT,                -- its first message's id: the idempotency key
	context_id  TEXT NOT NULL,
	state       TEXT NOT NULL,
	updated_ns  INTEGER NOT NULL,    -- status timestamp: the List order
	created_ns  INTEGER NOT NULL,    -- the store's clock at Create
	finished_ns INTEGER,             -- the store's clock when it turned terminal
	runner      TEXT NOT NULL,       -- the instance running it
	payload     BLOB,                -- the retained spawn payload
	snapshot    BLOB NOT NULL        -- the task's A2A JSON
);
CREATE UNIQUE INDEX tasks_message ON tasks (owner, message_id) WHERE message_id IS NOT NULL;
CREATE INDEX tasks_order ON tasks (updated_ns DESC, id DESC);
CREATE INDEX tasks_owner_order ON tasks (owner, updated_ns DESC, id DESC);
CREATE INDEX tasks_finished ON tasks (finished_ns) WHERE finished_ns IS NOT NULL;
CREATE INDEX tasks_unfinished ON tasks (created_ns) WHERE finished_ns IS NULL;

-- The number of tasks, kept by triggers (capacity checks without a scan).
CREATE TABLE task_count (one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL);
INSERT INTO task_count VALUES (1, 0);
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks BEGIN UPDATE task_count SET n = n + 1; END;
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks BEGIN UPDATE task_count SET n = n - 1; END;

CREATE TABLE push_configs (
	task_id   TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	config_id TEXT NOT NULL,
	seq       INTEGER NOT NULL,      -- registration order
	version   TEXT NOT NULL,         -- the protocol version it was registered through
	config    BLOB NOT NULL,         -- a2a.PushConfig JSON
	PRIMARY KEY (task_id, config_id)
);

CREATE TABLE push_pending (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	task_id  TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	runner   TEXT NOT NULL,           -- the instance delivering it
	snapshot BLOB NOT NULL,
	event    BLOB NOT NULL,
	final    INTEGER NOT NULL
);
CREATE INDEX push_pending_task ON push_pending (task_id);

CREATE TABLE blobs (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,        -- the root task of the tree that stored it
	run_id     TEXT NOT NULL,
	media_type TEXT NOT NULL,
	size       INTEGER NOT NULL,
	created_ns INTEGER NOT NULL,
	expires_ns INTEGER,              -- NULL while its task runs
	content    BLOB NOT NULL
);
CREATE INDEX blobs_owner ON blobs (owner);
