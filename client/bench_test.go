package client_test

import (
	"context"
	"testing"
)

func BenchmarkStat(b *testing.B) {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	tx := c.Begin()
	defer tx.Abort(ctx)
	for i := 0; i < b.N; i++ {
		if _, err := tx.StatInode(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}
