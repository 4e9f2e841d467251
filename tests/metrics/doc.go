// Package metrics tests the Prometheus metrics of servers and clients and the
// status page in a browser.
package metrics
