// Package tests holds the integration and fault tests: each starts real
// plasma processes (namenode, datanodes, CLI) on 127.0.0.1 in temporary
// directories and checks what users see.
package tests
