-- Schema version 3: every index costs each write, so only the ones the hot
-- path needs. An operator's list of every task sorts without tasks_order,
-- and Orphans (at start) scans without tasks_unfinished.
DROP INDEX tasks_order;
DROP INDEX tasks_unfinished;
