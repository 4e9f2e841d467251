package client_test

import (
	"context"
	"testing"
)

func BenchmarkStat(b *testing.B) {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	tx, _ := c.Begin(ctx)
	defer tx.Abort(ctx)
	for i := 0; i < b.N; i++ {
		if _, err := tx.Stat(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}
