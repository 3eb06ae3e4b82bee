package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/f91dcac0/tributary/engine"
	"github.com/f91dcac0/tributary/engine/assign"
)

// Member liveness in the program (contract rules 24–25, -session-timeout):
// a consumer of the program that no command named for the session timeout
// has expired, and the next command that uses it joins it again. A failing
// command changes nothing, so a consume of an expired consumer is checked
// against the assignment its rejoin would give (joinPlan) before the
// rejoin is made.

// joinPlan is a group's membership and assignment as a Join would change
// them, computed without joining: the engine's Join inserts the member
// into the sorted members and runs the group's assignor on them with the
// current owners as the previous assignment (engine/assign.Run), which
// joinPlan repeats on a description.
type joinPlan struct {
	assignor engine.Assignor
	members  []string // sorted bytewise, as Describe gives them
	owner    []string // owner[p] is partition p's member; "" when none
}

// planOf is g's plan now, and false when g's assignor is not one of the
// built-in ones (a user's assignor, given to the library by another
// program, cannot be run here).
func planOf(g engine.GroupDescription) (joinPlan, bool) {
	a, ok := assign.Lookup(g.Assignor)
	if !ok {
		return joinPlan{}, false
	}
	p := joinPlan{assignor: a, members: slices.Clone(g.Members), owner: make([]string, len(g.Partitions))}
	for i, gp := range g.Partitions {
		p.owner[i] = gp.Owner
	}
	return p, true
}

// join adds member as the engine's Join does (no change when it is a
// member already). Errors: the assignor's (ErrInvalidAssignment).
func (p *joinPlan) join(member string) error {
	i, found := slices.BinarySearch(p.members, member)
	if found {
		return nil
	}
	members := slices.Insert(slices.Clone(p.members), i, member)
	owner, err := assign.Run(p.assignor, members, p.owner)
	if err != nil {
		return err
	}
	p.members, p.owner = members, owner
	return nil
}

// owns reports whether member owns partition in p.
func (p joinPlan) owns(member string, partition int32) bool {
	return int(partition) < len(p.owner) && p.owner[partition] == member
}

// planLine is p as an assignment line, "billing (Range): c1 [p0 p1] c2 [p2]".
func (s *session) planLine(topic, group string, p joinPlan) string {
	return s.ownersLine(topic, group, p.assignor.Name(), p.members, p.owner)
}

// expiredNote is why a consumer of the program is no longer a member.
func (s *session) expiredNote() string {
	return fmt.Sprintf("no command named it for the session timeout, %v", s.c.Backend().SessionTimeout())
}

// checkConsumes checks, changing nothing, that each job's consumer will own
// its partition once the command has made it alive: with a session
// timeout, a consumer that has expired (no longer a member of its group)
// is checked against the assignment its rejoin would give, the rejoins of
// the jobs before it included (startConsumes makes them in job order).
// Without a session timeout it does nothing: startConsumes checks. It
// returns the index of the failing job with the error.
func (s *session) checkConsumes(jobs []consumeJob) (int, error) {
	if s.c.Backend().SessionTimeout() == 0 {
		return 0, nil
	}
	type key struct{ topic, group string }
	plans := map[key]*joinPlan{}
	described := map[key]bool{}
	rejoins := map[key][]string{} // the expired consumers the plan joins, in order
	for i, j := range jobs {
		k := key{j.c.Topic().Name(), j.c.Group()}
		if !described[k] {
			described[k] = true
			g, _, err := s.describeGroup(k.topic, k.group)
			if err != nil {
				// A group can be deleted only with no members: its
				// consumer here had expired.
				return i, fmt.Errorf("%w; consumer %s had expired (%s) before: delete consumer %s", err, quote(j.c.Name()), s.expiredNote(), j.c.Name())
			}
			if p, ok := planOf(g); ok {
				plans[k] = &p
			}
		}
		p := plans[k]
		if p == nil {
			continue // startConsumes checks after the rejoin
		}
		if !slices.Contains(p.members, j.c.Name()) {
			rejoins[k] = append(rejoins[k], j.c.Name())
		}
		if err := p.join(j.c.Name()); err != nil {
			return i, err
		}
	}
	for i, j := range jobs {
		k := key{j.c.Topic().Name(), j.c.Group()}
		p := plans[k]
		if p == nil || p.owns(j.c.Name(), j.partition) {
			continue
		}
		name, part, line := quote(j.c.Name()), s.partName(k.topic, j.partition), s.planLine(k.topic, k.group, *p)
		switch r := rejoins[k]; {
		case slices.Contains(r, j.c.Name()):
			return i, fmt.Errorf("consumer %s %w %s %s: it had expired (%s), and joining again would give %s; nothing changed: it is still expired",
				name, errNotOwner, k.topic, part, s.expiredNote(), line)
		case len(r) > 0:
			return i, fmt.Errorf("consumer %s %w %s %s once expired %s joined again: that would give %s; nothing changed",
				name, errNotOwner, k.topic, part, strings.Join(r, " "), line)
		default:
			return i, fmt.Errorf("consumer %s %w %s %s (group %s)", name, errNotOwner, k.topic, part, line)
		}
	}
	return 0, nil
}

// readyConsumes is checkConsumes, then startConsumes.
func (s *session) readyConsumes(jobs []consumeJob) (int, error) {
	if i, err := s.checkConsumes(jobs); err != nil {
		return i, err
	}
	return s.startConsumes(jobs)
}

// startConsumes makes each job's consumer alive (keepAlive: a heartbeat,
// or the rejoin of an expired one, which it prints), in job order, then
// checks that each owns its partition. It returns the index of the failing
// job with the error. After checkConsumes it fails only when a member's
// session ran out between the two.
func (s *session) startConsumes(jobs []consumeJob) (int, error) {
	for i, j := range jobs {
		if err := s.keepAlive(j.c); err != nil {
			return i, err
		}
	}
	for i, j := range jobs {
		if !slices.Contains(j.c.Assignment(), j.partition) {
			topic := j.c.Topic().Name()
			line, _ := s.assignmentLine(topic, j.c.Group())
			return i, fmt.Errorf("consumer %s %w %s %s (group %s)", quote(j.c.Name()), errNotOwner, topic, s.partName(topic, j.partition), line)
		}
	}
	return 0, nil
}

// isMember reports whether c is a member of its group now (a Describe, so
// members whose session has run out are expired first).
func (s *session) isMember(c consumerRef) (bool, error) {
	g, _, err := s.describeGroup(c.Topic().Name(), c.Group())
	if err != nil {
		return false, err
	}
	_, found := slices.BinarySearch(g.Members, c.Name())
	return found, nil
}

// canJoinAgain reports whether create consumer <group> <name> may make a
// new incarnation of c, the program's consumer of that name: with a
// session timeout, c is of that topic and group and has expired (it is
// not a member any more). When c has expired but is of another group, the
// error says so (the name is still the program's consumer's).
func (s *session) canJoinAgain(c consumerRef, topic, group string) (bool, error) {
	if s.c.Backend().SessionTimeout() == 0 {
		return false, nil
	}
	member, err := s.isMember(c)
	if err != nil {
		// c's group is gone (deleted while c had expired): the name is
		// still c's, which the duplicate error says.
		return false, nil
	}
	if member {
		return false, nil
	}
	if c.Group() != group || c.Topic().Name() != topic {
		return false, fmt.Errorf("consumer %s %w (in group %s of topic %s, where it expired: %s; delete consumer %s frees the name)",
			quote(c.Name()), errDuplicateID, quote(c.Group()), quote(c.Topic().Name()), s.expiredNote(), c.Name())
	}
	return true, nil
}
