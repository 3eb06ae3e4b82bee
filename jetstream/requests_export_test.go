package jetstream

// Requests returns how many messages b's connection has sent so far: each
// JetStream API call, state read or write, fetch, publish and notice is one
// (nats.Conn.Stats' OutMsgs).
func Requests(b *Backend) uint64 { return b.nc.Stats().OutMsgs }
