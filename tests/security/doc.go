// Package security tests security against real processes: security levels,
// tickets, roles, ownership, delegation tokens, hostile requests to the
// namenode and datanodes, and the admin port.
package security
