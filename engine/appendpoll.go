package engine

// AppendPoll is Poll appending the reserved records to dst and returning the
// extended slice, so that a steady consumer that reuses one buffer (passing
// buf[:0]) allocates nothing. dst stays the caller's: the broker keeps no
// reference to it. Records already in dst are left as they are. On error it
// returns dst unchanged with the error; the rules, order and limits are
// Poll's (SPEC rule 10), and maxRecords counts only the records this call
// reserves.
func (b *Broker) AppendPoll(dst []Record, topicName, groupName, member string, maxRecords int32) ([]Record, error) {
	return b.appendPoll(dst, topicName, groupName, member, maxRecords)
}
