// Package trigger decides when a root runs, and leaves how to the Runner cmd
// gives it: the one-shot runner for agentd run, the task engine for agentd
// serve (there each run is an A2A task with the trigger's Event.Metadata).
//
// The standing triggers are Loop (run again after each run ends), Schedule
// (cron expressions and fixed intervals, through robfig/cron/v3's parser;
// a tick missed while agentd was down runs once at start when a state file
// keeps the last tick) and Reactive (MCP resource subscriptions, debounced,
// with the resource's current content as a seed slice). Their roots are
// session-backing: a run that fails is started again under the restart
// governor (supervisor.Governor: backoff, then a breaker after too many
// failures), one governor key per session (LoopKey, ScheduleKey,
// Subscription.Key). A once or workflow root never goes through a trigger and
// is never restarted.
//
// A session runs one root at a time. An event that comes during a run
// follows the session's Overlap policy: skip it, queue one (the newest
// waiting event wins), or cancel the running run for it. While a session's
// breaker is open its events are dropped, and it waits for an operator to
// close the breaker (or, with Options.StopOnBreaker, ends with
// ErrBreakerOpen). Time is read from the time package only, so the tests run
// the schedules on testing/synctest's fake clock.
package trigger
