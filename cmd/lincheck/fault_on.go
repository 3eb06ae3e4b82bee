//go:build tributary_faults

package main

import (
	"flag"
	"strings"

	"github.com/f91dcac0/tributary/engine"
)

// In a tributary_faults build, -fault runs the workloads against a broken
// broker, to see what a violation looks like:
//
//	go run -tags tributary_faults ./cmd/lincheck -fault ack-skips-owner -mix rebalance
func init() {
	faultFlag = func(fs *flag.FlagSet) func() (func(int32) (*engine.Broker, error), string, error) {
		var names []string
		for _, f := range engine.Faults() {
			names = append(names, f.String())
		}
		name := fs.String("fault", "none", "inject a deliberate bug: none or one of "+strings.Join(names, ", "))
		return func() (func(int32) (*engine.Broker, error), string, error) {
			f, err := engine.ParseFault(*name)
			if err != nil || f == engine.FaultNone {
				return nil, "", err
			}
			return func(c int32) (*engine.Broker, error) {
				b, err := engine.New(c)
				if err == nil {
					err = b.InjectFault(f)
				}
				return b, err
			}, f.String(), nil
		}
	}
}
