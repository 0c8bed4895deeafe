-- Schema version 5: one index of finished tasks, not two. Every commit of a
-- task's end wrote a page of each; the oldest finished tasks of the store
-- are now found per caller (the callers table names every caller that holds
-- a task) through tasks_owner_finished: expiry, prune and eviction of other
-- callers' tasks cost one index seek per caller instead of one in all.
DROP INDEX tasks_finished;
