-- agentd's PostgreSQL store: follow-up messages forwarded to the replica
-- that runs their task (tasks.Forwarder). A replica a caller sent a message
-- naming a task another runs stores it here (the message's JSON) and
-- NOTIFYs agentd_forward with the task's id; the runner takes it (joins it
-- to the task and deletes the row) or refuses it (refusal_code and
-- refusal_text set, kept for the sender, who deletes the row once it has
-- answered its caller).
CREATE TABLE forwarded (
	seq          bigserial PRIMARY KEY,
	task_id      text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	message      bytea NOT NULL,
	refusal_code text,
	refusal_text text
);
CREATE INDEX forwarded_task ON forwarded (task_id, seq);
