-- agentd's PostgreSQL store: the audit trail of operator actions
-- (tasks.Auditor), shared by every replica: one row an action, in the order
-- they were appended (seq). Its retention is bounded by count and age
-- (Options.AuditKeep, AuditMaxAge): each append deletes the rows beyond
-- them. (Numbered 0009 beside the migrations of other work: the schema
-- version is how many migrations there are, applied in name order.)
CREATE TABLE audit (
	seq      bigserial PRIMARY KEY,
	at_ns    bigint NOT NULL, -- the appending replica's clock: retention
	time_ns  bigint NOT NULL, -- the record's time
	caller   text NOT NULL,
	method   text NOT NULL,
	target   text NOT NULL,
	outcome  text NOT NULL,
	detail   text NOT NULL,
	instance text NOT NULL
);
CREATE INDEX audit_at ON audit (at_ns);
CREATE INDEX audit_method ON audit (method, seq);
CREATE INDEX audit_caller ON audit (caller, seq);
