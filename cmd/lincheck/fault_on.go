//go:build tributary_faults

package main

import (
	"flag"
	"strings"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/porcupine"
)

// In a tributary_faults build, -fault runs the workloads against a broken
// broker, to see what a violation looks like (with -mix all, the default,
// on the mix that exposes the fault):
//
//	go run -tags tributary_faults ./cmd/lincheck -fault ack-skips-owner -mix rebalance
//	go run -tags tributary_faults ./cmd/lincheck -fault seek-keeps-inflight
func init() {
	faultNames = func() []string {
		var names []string
		for _, f := range engine.Faults() {
			names = append(names, f.String())
		}
		return names
	}
	faultFlag = func(fs *flag.FlagSet) func() (porcupine.NewBroker, string, error) {
		name := fs.String("fault", "none", "inject a deliberate bug: none or one of "+strings.Join(faultNames(), ", ")+
			" (with -mix all: the mix that exposes it)")
		return func() (porcupine.NewBroker, string, error) {
			f, err := engine.ParseFault(*name)
			if err != nil || f == engine.FaultNone {
				return nil, "", err
			}
			return func(c int32, opts ...engine.Option) (*engine.Broker, error) {
				b, err := engine.New(c, opts...)
				if err == nil {
					err = b.InjectFault(f)
				}
				return b, err
			}, f.String(), nil
		}
	}
}
