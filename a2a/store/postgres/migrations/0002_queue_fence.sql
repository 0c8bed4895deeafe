-- agentd's PostgreSQL store, schema version 2: the admission queue the
-- replicas share, and fencing of a replica whose tasks were taken over.

-- A task waiting in the shared queue is run by no replica: its runner is
-- the queue's sentinel, whose lease never expires (so the task is never an
-- orphan while it waits). A replica with a free slot claims it (FOR UPDATE
-- SKIP LOCKED) and becomes its runner in the same transaction.
INSERT INTO leases (instance, heartbeat, started) VALUES ('agentd:queue', 'infinity', now());

CREATE TABLE run_queue (
	seq      bigserial UNIQUE,
	task_id  text PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
	owner    text NOT NULL,
	auth     text NOT NULL,
	operator boolean NOT NULL,
	priority int NOT NULL,
	request  bytea NOT NULL,
	queued   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_queue_owner ON run_queue (owner);

-- Each replica's run slots (its max_live_runs), published by the replica:
-- their sum over the live replicas is the service's, which fair shares
-- divide.
ALTER TABLE leases ADD COLUMN max_runs int NOT NULL DEFAULT 0;

-- The order the queue is served in, admit/'s three steps as SQL:
--  1. fair shares: with A callers active (a run going or queued), a
--     caller's share is ceil(slots / A), slots the live replicas' run slots;
--     the runs of callers below their share come first;
--  2. priority (high, normal, low);
--  3. round-robin, as a virtual position: the runs a caller has going
--     (its unfinished root tasks, which hold a retained payload, outside
--     the queue) plus its rank among its own queued runs; then arrival.
-- A live replica is one whose heartbeat is within the lease of the
-- reading connection (agentd.lease_seconds). pos 1 is next.
CREATE VIEW run_queue_order AS
WITH running AS (
	SELECT owner, count(*) AS n FROM tasks
	WHERE finished_ns IS NULL AND payload IS NOT NULL AND runner <> 'agentd:queue'
	GROUP BY owner
), active AS (
	SELECT count(*) AS n FROM (SELECT owner FROM running UNION SELECT owner FROM run_queue) o
), slots AS (
	SELECT greatest(coalesce(sum(max_runs), 0), 1) AS n FROM leases
	WHERE instance <> 'agentd:queue'
	AND heartbeat >= now() - make_interval(secs => coalesce(nullif(current_setting('agentd.lease_seconds', true), ''), '15')::float8)
), ranked AS (
	SELECT q.task_id, q.priority, q.seq,
		coalesce(r.n, 0) < ceil((SELECT n FROM slots)::numeric / greatest((SELECT n FROM active), 1)) AS below_share,
		coalesce(r.n, 0) + row_number() OVER (PARTITION BY q.owner ORDER BY q.priority DESC, q.seq) AS vpos
	FROM run_queue q LEFT JOIN running r ON r.owner = q.owner
)
SELECT task_id, row_number() OVER (ORDER BY below_share DESC, priority DESC, vpos, seq) AS pos FROM ranked;

-- Every change of the queue wakes the replicas (they claim when they have
-- room).
CREATE FUNCTION agentd_queue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('agentd_queue', '');
	RETURN NULL;
END $$;
CREATE TRIGGER run_queue_notify AFTER INSERT ON run_queue FOR EACH STATEMENT EXECUTE FUNCTION agentd_queue_notify();

-- Fencing. Each replica's connections carry its instance id
-- (agentd.instance, a run-time parameter set at connect). A change of a
-- task's runner is a takeover (a claim of an orphan, a claim from the
-- queue, a run queued): its epoch goes up and the runner it was taken from
-- is kept. Any other change of a task by a replica that is not its runner,
-- while that runner lives (or once the task finished), is refused
-- (SQLSTATE AG001): a replica paused past its lease, whose tasks
-- another replica took over, writes nothing to them when it comes back.
-- Connections without the parameter (operators' tools) are not fenced.
ALTER TABLE tasks ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN taken_from text;
CREATE INDEX tasks_taken_from ON tasks (taken_from) WHERE taken_from IS NOT NULL;
CREATE FUNCTION agentd_task_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	w text := current_setting('agentd.instance', true);
BEGIN
	IF NEW.runner IS DISTINCT FROM OLD.runner THEN
		NEW.epoch := OLD.epoch + 1;
		NEW.taken_from := OLD.runner;
		RETURN NEW;
	END IF;
	IF w IS NULL OR w = '' OR w = OLD.runner THEN
		RETURN NEW;
	END IF;
	-- An unfinished orphan (its runner's lease expired) is anyone's to
	-- resolve (the engine claims it first, as recovery does), but for the
	-- replica it was taken from.
	IF OLD.finished_ns IS NULL AND OLD.runner <> 'agentd:queue' AND OLD.taken_from IS DISTINCT FROM w AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.instance = OLD.runner
			AND l.heartbeat >= now() - make_interval(secs => coalesce(nullif(current_setting('agentd.lease_seconds', true), ''), '1e9')::float8)) THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION 'agentd: task % is run by replica % since it was taken over (epoch %), not by %', OLD.id, OLD.runner, OLD.epoch, w
		USING ERRCODE = 'AG001';
END $$;
CREATE TRIGGER tasks_fence BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION agentd_task_fence();
