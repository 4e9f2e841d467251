package kv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/plasmafs/plasma/kv"
)

// Create a database, write a batch, read it back.
func Example() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	if err := kv.Create(ctx, c, "/examples/colors", kv.CreateOptions{MaxKeyLength: 64}); err != nil {
		fmt.Println(err)
		return
	}
	db, err := kv.Open(ctx, c, "/examples/colors", kv.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	w, err := db.Begin(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Put([]byte("red"), []byte("#ff0000"))
	w.Put([]byte("green"), []byte("#00ff00"))
	w.Put([]byte("blue"), []byte("#0000ff"))
	if err := w.Commit(ctx); err != nil { // one PlasmaFS transaction
		fmt.Println(err)
		return
	}

	v, _ := db.Get([]byte("green"))
	fmt.Println(string(v))
	_, err = db.Get([]byte("purple"))
	fmt.Println(errors.Is(err, kv.ErrNotFound))
	// Output:
	// #00ff00
	// true
}

// A snapshot keeps its version while a writer commits; Refresh moves the
// database to the newest one.
func ExampleDB_Refresh() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	kv.Create(ctx, c, "/examples/refresh", kv.CreateOptions{})
	writer, _ := kv.Open(ctx, c, "/examples/refresh", kv.Options{})
	defer writer.Close()
	reader, _ := kv.Open(ctx, c, "/examples/refresh", kv.Options{})
	defer reader.Close()

	w, _ := writer.Begin(ctx)
	w.Put([]byte("greeting"), []byte("hello"))
	w.Commit(ctx)

	_, err := reader.Get([]byte("greeting"))
	fmt.Println("before refresh:", err)
	reader.Refresh(ctx)
	v, _ := reader.Get([]byte("greeting"))
	fmt.Println("after refresh:", string(v))
	// Output:
	// before refresh: kv: key not found
	// after refresh: hello
}

// Only one writer at a time: the second fails at once.
func ExampleDB_Begin() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	kv.Create(ctx, c, "/examples/locked", kv.CreateOptions{})
	db, _ := kv.Open(ctx, c, "/examples/locked", kv.Options{})
	defer db.Close()

	w1, _ := db.Begin(ctx)
	_, err := db.Begin(ctx)
	fmt.Println(errors.Is(err, kv.ErrLocked))
	w1.Abort(ctx)
	w2, err := db.Begin(ctx)
	fmt.Println(err)
	w2.Abort(ctx)
	// Output:
	// true
	// <nil>
}

// Keys come out in byte order; a Range selects by prefix or bounds
// (both inclusive).
func ExampleDB_Scan() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	kv.Create(ctx, c, "/examples/scan", kv.CreateOptions{})
	db, _ := kv.Open(ctx, c, "/examples/scan", kv.Options{})
	defer db.Close()
	w, _ := db.Begin(ctx)
	for _, k := range []string{"user/bob", "user/alice", "group/staff", "user/carol"} {
		w.Put([]byte(k), []byte(strings.ToUpper(k)))
	}
	w.Commit(ctx)

	it := db.Scan(kv.Range{Prefix: []byte("user/"), To: []byte("user/bob")})
	defer it.Close()
	for it.Next() {
		v, _ := it.Value()
		fmt.Printf("%s=%s\n", it.Key(), v)
	}
	n, _ := db.Count(kv.Range{Prefix: []byte("user/")})
	fmt.Println(n, "users")
	// Output:
	// user/alice=USER/ALICE
	// user/bob=USER/BOB
	// 3 users
}

// Large values are streamed in and out.
func ExampleWriter_PutReader() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	kv.Create(ctx, c, "/examples/large", kv.CreateOptions{})
	db, _ := kv.Open(ctx, c, "/examples/large", kv.Options{})
	defer db.Close()
	w, _ := db.Begin(ctx)
	if err := w.PutReader([]byte("log"), strings.NewReader(strings.Repeat("line\n", 100000))); err != nil {
		fmt.Println(err)
		return
	}
	w.Commit(ctx)

	v, _ := db.Lookup([]byte("log"))
	defer v.Close()
	n, err := io.Copy(io.Discard, v) // streamed block by block, checksum checked
	fmt.Println(v.Size(), n, err)
	io.Copy(os.Stdout, io.NewSectionReader(v, 0, 10))
	// Output:
	// 500000 500000 <nil>
	// line
	// line
}

// Vacuum reclaims what replaced and deleted values left behind.
func ExampleDB_Vacuum() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	kv.Create(ctx, c, "/examples/vacuum", kv.CreateOptions{})
	db, _ := kv.Open(ctx, c, "/examples/vacuum", kv.Options{})
	defer db.Close()
	for i := 0; i < 3; i++ {
		w, _ := db.Begin(ctx)
		w.Put([]byte("counter"), []byte(strings.Repeat(fmt.Sprint(i), 10000)))
		w.Commit(ctx)
	}
	fmt.Println("garbage before:", db.Stats().Garbage > 20000)
	if _, err := db.Vacuum(ctx, kv.VacuumOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("garbage after:", db.Stats().Garbage)
	v, _ := db.Get([]byte("counter"))
	fmt.Println(len(v), string(v[:3]))
	// Output:
	// garbage before: true
	// garbage after: 0
	// 10000 222
}
