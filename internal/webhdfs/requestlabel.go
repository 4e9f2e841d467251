package webhdfs

import "strings"

// labelOther is the request label of anything that names no WebHDFS
// operation: a URL outside the prefix, a malformed query, no op= or an
// op= no WebHDFS server knows.
const labelOther = "other"

// requestLabel is the name Options.OnRequest is given for a request
// whose op= is op: the operation's upper-case name when it is one the
// gateway serves or refuses as unsupported, labelOther otherwise. The
// labels are a fixed set, whatever clients send, so that a metric
// labelled by them stays small.
func requestLabel(op string) string {
	op = strings.ToUpper(op)
	if _, ok := ops[op]; ok || unsupported[op] {
		return op
	}
	return labelOther
}

// count tells Options.OnRequest of a request labelled label.
func (g *Gateway) count(label string) {
	if g.opt.OnRequest != nil {
		g.opt.OnRequest(label)
	}
}
