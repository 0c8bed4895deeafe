-- The audit trail of operator actions (tasks.Auditor): one row an action,
-- in the order they were appended (seq). Its retention is bounded by count
-- and age (Options.AuditKeep, AuditMaxAge): each append deletes the rows
-- beyond them. (Numbered 0009 beside the migrations of other work: the
-- schema version is how many migrations there are, applied in name order.)
CREATE TABLE audit (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	at_ns    INTEGER NOT NULL, -- the store's clock at the append: retention
	time_ns  INTEGER NOT NULL, -- the record's time
	caller   TEXT NOT NULL,
	method   TEXT NOT NULL,
	target   TEXT NOT NULL,
	outcome  TEXT NOT NULL,
	detail   TEXT NOT NULL,
	instance TEXT NOT NULL
);
CREATE INDEX audit_at ON audit (at_ns);
CREATE INDEX audit_method ON audit (method, seq);
CREATE INDEX audit_caller ON audit (caller, seq);
