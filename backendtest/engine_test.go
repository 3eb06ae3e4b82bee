package backendtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/engine"
)

// engineFactory makes the in-process engine backend (NewEngineBackend: no
// session timeout unless cfg sets one), honouring every field of cfg.
func engineFactory(t *testing.T, cfg backendtest.Config) tributary.Backend {
	t.Helper()
	var opts []engine.Option
	if cfg.AckTimeout > 0 {
		opts = append(opts, engine.WithAckTimeout(cfg.AckTimeout))
	}
	if cfg.Clock != nil {
		opts = append(opts, engine.WithClock(cfg.Clock))
	}
	if cfg.MaxMessageBytes > 0 {
		opts = append(opts, engine.WithMaxMessageBytes(cfg.MaxMessageBytes))
	}
	if cfg.ReplayWindow != 0 {
		opts = append(opts, engine.WithReplayWindow(cfg.ReplayWindow))
	}
	if cfg.SessionTimeout != 0 {
		opts = append(opts, engine.WithSessionTimeout(cfg.SessionTimeout))
	}
	b, err := tributary.NewEngineBackend(cfg.Capacity, opts...)
	require.NoError(t, err)
	c, err := tributary.NewClusterOn(b)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c.Backend()
}

// TestEngineBackend runs the whole suite against the in-process engine.
func TestEngineBackend(t *testing.T) {
	backendtest.Run(t, engineFactory, nil)
}
