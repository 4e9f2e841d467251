// Command gowc is a Go-API MapReduce job for the tests: a word count with
// a combiner and a partitioner by first letter, one executable that is
// both the job's submitter and its tasks.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/mapred"
)

func sum(key []byte, values [][]byte, emit mapred.Emit) error {
	n := 0
	for _, v := range values {
		k, err := strconv.Atoi(string(v))
		if err != nil {
			return err
		}
		n += k
	}
	return emit(key, []byte(strconv.Itoa(n)))
}

var funcs = mapred.Funcs{
	Map: func(line []byte, emit mapred.Emit) error {
		for _, w := range bytes.Fields(line) {
			if err := emit(w, []byte("1")); err != nil {
				return err
			}
		}
		return nil
	},
	Combine: sum,
	Reduce:  sum,
	// By first byte: every output file holds words of its own letters.
	Partition: func(key []byte, parts int) int { return int(key[0]) % parts },
}

func main() {
	if task, err := funcs.ServeTask(); task {
		if err != nil {
			fail(err)
		}
		return
	}
	in := flag.String("input", "", "input directory")
	out := flag.String("output", "", "output directory")
	parts := flag.Int("partitions", 3, "partitions")
	work := flag.String("work", "/gowork", "work directory")
	logDir := flag.String("log", "/golog", "log directory")
	split := flag.Int64("split-size", 32<<20, "input bytes per map task")
	sortBuf := flag.Int64("sort-buffer", 64<<20, "memory per task for sorting")
	flag.Parse()
	exe, err := os.Executable()
	if err != nil {
		fail(err)
	}
	j := mapred.Job{Name: "gowc", Input: *in, Output: *out, Work: *work, Log: *logDir, Partitions: *parts, SplitSize: *split, SortBuffer: *sortBuf}
	if err := j.Use(exe, funcs); err != nil {
		fail(err)
	}
	ctx := context.Background()
	cfg, err := client.LoadConfig("", nil)
	if err != nil {
		fail(err)
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		fail(err)
	}
	defer c.Close()
	rep, err := mapred.Run(ctx, c, j, mapred.Options{})
	if rep != nil {
		fmt.Print(rep.Text())
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gowc:", err)
	os.Exit(1)
}
