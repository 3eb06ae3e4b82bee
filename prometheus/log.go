package tribprom

import (
	"context"
	"log/slog"
)

// logger is the Collector's optional *slog.Logger; the zero value logs
// nothing.
type logger struct{ l *slog.Logger }

func (l logger) describeFailed(topic string, err error) {
	if l.l == nil {
		return
	}
	l.l.LogAttrs(context.Background(), slog.LevelWarn, "tributary: describe failed",
		slog.String("topic", topic), slog.Any("err", err))
}
