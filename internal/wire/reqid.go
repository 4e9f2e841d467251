package wire

import "strconv"

// A request id follows a client's transaction (or a request outside one)
// through the logs: the client sets Request.ReqID and DataReq.ReqID, the
// namenode and the datanodes name it in what they log about the request
// (refusals an operator should see, slow requests), and the client's error
// for such a refusal names it too, so one grep finds every side of it.

// FormatReqID is how a request id is written in logs and error messages:
// 16 hexadecimal digits.
func FormatReqID(id uint64) string {
	s := strconv.FormatUint(id, 16)
	const zeros = "0000000000000000"
	return zeros[len(s):] + s
}

// Logged reports whether a request answered with code is logged by the
// server that answered it (at warning level), with its request id: the
// refusals that point at a problem of the cluster or of an access
// (permission, internal errors, missing datanodes or space), not the
// answers a program expects in its normal course (not found, exists,
// conflict).
func (c Code) Logged() bool {
	switch c {
	case ErrCodePerm, ErrCodeInternal, ErrCodeUnavailable, ErrCodeNoSpace, ErrCodeTxn:
		return true
	}
	return false
}
