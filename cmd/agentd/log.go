package main

import (
	"flag"
	"io"
	"log/slog"
	"os"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/telemetry"
)

// level is --log-level (checked by Validate).
func (c *coreConfig) level() slog.Level {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	return lvl
}

// Log formats (--log-format).
const (
	logText = "text"
	logJSON = "json"
)

// logger is the logger of serve and run on w at --log-level (checked by
// Validate), in --log-format: given, else text when w is a terminal and JSON
// otherwise. A child's lines reach it as JSON (children always log JSON to
// their supervisor) and are rendered in this format.
func (c *coreConfig) logger(w io.Writer) *slog.Logger {
	lvl := c.level()
	format := c.LogFormat
	if format == "" {
		format = logJSON
		if cli.IsTerminal(w) {
			format = logText
		}
	}
	var h slog.Handler
	if format == logText {
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: shortTime})
	} else {
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	}
	// Every line with a span in its context (or from a logger tied to one)
	// carries trace_id and span_id.
	return slog.New(telemetry.NewLogHandler(h))
}

// shortTime writes a text line's time as the time of day, to the millisecond:
// a person reading a terminal knows the date.
func shortTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 && a.Value.Kind() == slog.KindTime {
		return slog.String(slog.TimeKey, a.Value.Time().Format("15:04:05.000"))
	}
	return a
}

// logLevelGiven reports whether --log-level or its variable was set, once f
// is parsed.
func logLevelGiven(f *cli.Flags) bool {
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == "log-level" })
	_, env := os.LookupEnv("AGENT_LOG_LEVEL")
	return given || env
}
