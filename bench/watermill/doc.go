// Package watermill compares Tributary's typed consumers with Watermill's
// in-process Pub/Sub (github.com/ThreeDotsLabs/watermill/pubsub/gochannel)
// and a plain channel, in one benchmark run. It is a module of its own so
// that importers of Tributary's core do not pull Watermill in; it has no
// API, only benchmarks:
//
//	cd bench/watermill && go test -run '^$' -bench . -benchtime 1s -count 3
package watermill
