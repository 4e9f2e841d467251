package namenode

import "errors"

// errLostWhileTakingOver: the member was deposed while it caught up.
var errLostWhileTakingOver = errors.New("namenode group: lost the leadership while catching up to lead")

// TakeOver readies this member, just elected, to lead (Ready) and returns
// the term it leads in, which its namenode's tickets carry (Config.Term).
// The term is read before catching up and checked after it: a member that
// was deposed meanwhile (a later term began) must not issue tickets of a
// term some other member leads.
func (g *Group) TakeOver() (uint64, error) {
	term := g.raft.CurrentTerm()
	if err := g.Ready(); err != nil {
		return 0, err
	}
	if g.raft.CurrentTerm() != term || !g.IsLeader() {
		return 0, errLostWhileTakingOver
	}
	return term, nil
}
