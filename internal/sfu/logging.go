package sfu

import (
	"fmt"
	"log/slog"

	"github.com/pion/logging"
)

// pionLogs routes pion's log lines into the node's logger: its errors as
// warnings (they concern one peer, never the node), the rest as debug.
type pionLogs struct{ log *slog.Logger }

func (f pionLogs) NewLogger(scope string) logging.LeveledLogger {
	return pionLogger{f.log.With("component", "webrtc", "scope", scope)}
}

type pionLogger struct{ l *slog.Logger }

func (p pionLogger) Trace(string)                   {}
func (p pionLogger) Tracef(string, ...any)          {}
func (p pionLogger) Debug(msg string)               { p.l.Debug(msg) }
func (p pionLogger) Debugf(format string, a ...any) { p.l.Debug(fmt.Sprintf(format, a...)) }
func (p pionLogger) Info(msg string)                { p.l.Debug(msg) }
func (p pionLogger) Infof(format string, a ...any)  { p.l.Debug(fmt.Sprintf(format, a...)) }
func (p pionLogger) Warn(msg string)                { p.l.Debug(msg) }
func (p pionLogger) Warnf(format string, a ...any)  { p.l.Debug(fmt.Sprintf(format, a...)) }
func (p pionLogger) Error(msg string)               { p.l.Warn(msg) }
func (p pionLogger) Errorf(format string, a ...any) { p.l.Warn(fmt.Sprintf(format, a...)) }
