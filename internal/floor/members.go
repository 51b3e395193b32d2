package floor

// Members as the floors see them: roles, subgroups, leaving.

// AddMember makes id a member with a role, in subgroup group ("" = main).
func (c *Controller) AddMember(id, role, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[id] = memberInfo{role: role, group: group}
	for _, n := range Floors {
		f := c.floors[n]
		if f.style == StyleBrainstorming && role != RoleListener && f.active[id] == nil {
			c.newGranted(f, id, true, "")
		}
		if f.style == StyleDiscussion {
			c.primaryOf(f, group)
		}
		c.gate(f)
	}
}

// SetGroup moves a member to another subgroup. Under discussion groups it
// gives up the token and requests of its old group.
func (c *Controller) SetGroup(id, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mi, ok := c.members[id]
	if !ok || mi.group == group {
		return
	}
	for _, n := range Floors {
		if f := c.floors[n]; f.style == StyleDiscussion {
			c.leaveFloor(f, id, Revoked)
		}
	}
	mi.group = group
	c.members[id] = mi
	for _, n := range Floors {
		f := c.floors[n]
		if f.style == StyleDiscussion {
			c.primaryOf(f, group)
		}
		c.gate(f)
	}
}

func (c *Controller) leaveFloor(f *floorState, id string, final Status) {
	r := f.active[id]
	switch {
	case r == nil:
	case r.Status.Waiting():
		c.move(f, r, Cancelled)
	case r.Replica:
		c.dropReplica(f, id, final)
	default:
		c.freePrimary(f, r.Group, final)
	}
}

// RemoveMember takes a leaving member's tokens and requests away; a token
// it held passes to the next in the queue.
func (c *Controller) RemoveMember(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.members[id]; !ok {
		return
	}
	for _, n := range Floors {
		c.leaveFloor(c.floors[n], id, Released)
	}
	delete(c.members, id)
	for _, n := range Floors {
		c.gate(c.floors[n])
	}
}
