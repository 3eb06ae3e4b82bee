package kafka

// coordinator is the group coordinator of classic consumer groups.
type coordinator struct {
	s *Server
}

func newCoordinator(s *Server) *coordinator { return &coordinator{s: s} }

// close ends every group's waits (Server.Close).
func (c *coordinator) close() {}
