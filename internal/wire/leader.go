package wire

import "fmt"

// NotLeader is the answer of a namenode group member that is not the
// leader: leader is the leader's client address ("" when none is known,
// as during an election or below a majority), members the group's size.
func NotLeader(leader string, members int) *Response {
	if leader == "" {
		return &Response{Code: ErrCodeNotLeader, Msg: fmt.Sprintf("this namenode is not the leader of its group and knows of none: an election is under way, "+
			"or fewer than a majority of the group's %d namenodes can reach each other (metadata can be neither read nor changed until a majority is back)", members)}
	}
	return &Response{Code: ErrCodeNotLeader, Msg: "this namenode is not the leader of its group: try " + leader, Paths: []string{leader}}
}

// NotLeaderAddr returns the leader's address a NotLeader answer names
// ("" if none).
func NotLeaderAddr(r *Response) string {
	if r.Code == ErrCodeNotLeader && len(r.Paths) > 0 {
		return r.Paths[0]
	}
	return ""
}
