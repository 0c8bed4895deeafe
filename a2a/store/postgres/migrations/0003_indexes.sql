-- Schema version 3: every index costs each write, so only the ones the hot
-- path needs. An operator's list of every task sorts without tasks_order.
-- (tasks_unfinished stays: every replica runs Orphans each half lease.)
DROP INDEX tasks_order;
