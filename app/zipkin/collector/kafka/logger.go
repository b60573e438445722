package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// logger passes franz-go's warnings and errors to slog; its info and debug
// lines are dropped.
type logger struct{ log *slog.Logger }

func (l *logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l *logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	l.log.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
