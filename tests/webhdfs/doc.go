// Package webhdfs tests the WebHDFS gateway with curl, Hadoop, Python and Spark
// clients, its identities and its answers to bad input.
package webhdfs
