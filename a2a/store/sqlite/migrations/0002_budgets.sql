-- Schema version 2: the bytes each task takes (its snapshot and retained
-- payload), summed by the triggers beside the count, for the store's byte
-- bound and per-caller quotas.
ALTER TABLE tasks ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET size = length(snapshot) + coalesce(length(payload), 0);
ALTER TABLE task_count ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
UPDATE task_count SET bytes = (SELECT coalesce(sum(size), 0) FROM tasks);
DROP TRIGGER tasks_count_insert;
DROP TRIGGER tasks_count_delete;
CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks BEGIN UPDATE task_count SET n = n + 1, bytes = bytes + NEW.size; END;
CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks BEGIN UPDATE task_count SET n = n - 1, bytes = bytes - OLD.size; END;
CREATE TRIGGER tasks_count_size AFTER UPDATE OF size ON tasks BEGIN UPDATE task_count SET bytes = bytes + NEW.size - OLD.size; END;
CREATE INDEX tasks_owner_finished ON tasks (owner, finished_ns) WHERE finished_ns IS NOT NULL;
