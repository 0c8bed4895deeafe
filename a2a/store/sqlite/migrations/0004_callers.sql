-- Schema version 4: the tasks and bytes each caller holds, kept by the
-- triggers that kept the store's totals, so that a per-caller quota check
-- reads one row instead of counting the caller's tasks. The store's totals
-- are their sum (one row per caller that holds a task), and task_count goes:
-- a write still updates one counter row, not two.
CREATE TABLE callers (
	owner TEXT PRIMARY KEY,
	n     INTEGER NOT NULL,
	bytes INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO callers (owner, n, bytes) SELECT owner, count(*), coalesce(sum(size), 0) FROM tasks GROUP BY owner;
DROP TRIGGER tasks_count_insert;
DROP TRIGGER tasks_count_delete;
DROP TRIGGER tasks_count_size;
DROP TABLE task_count;
CREATE TRIGGER callers_insert AFTER INSERT ON tasks BEGIN
	INSERT INTO callers (owner, n, bytes) VALUES (NEW.owner, 1, NEW.size)
		ON CONFLICT (owner) DO UPDATE SET n = n + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER callers_delete AFTER DELETE ON tasks BEGIN
	UPDATE callers SET n = n - 1, bytes = bytes - OLD.size WHERE owner = OLD.owner;
	DELETE FROM callers WHERE owner = OLD.owner AND n = 0;
END;
CREATE TRIGGER callers_size AFTER UPDATE OF size ON tasks BEGIN
	UPDATE callers SET bytes = bytes + NEW.size - OLD.size WHERE owner = NEW.owner;
END;
