package ops

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns the daemon's one logger, writing to w: slog's text
// handler when w is a terminal (a person reads it), JSON lines otherwise
// (journald, a collector). level is debug, info, warn or error; anything
// else is an error, and the logger returned with it logs at error level so
// that a caller that goes on anyway is not silent.
func NewLogger(w io.Writer, level string, terminal bool) (*slog.Logger, error) {
	var lvl slog.Level
	var err error
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "debug":
		lvl = slog.LevelDebug
	case "info", "":
		lvl = slog.LevelInfo
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		lvl = slog.LevelError
		err = fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if terminal {
		h = slog.NewTextHandler(w, o)
	} else {
		h = slog.NewJSONHandler(w, o)
	}
	return slog.New(h), err
}
