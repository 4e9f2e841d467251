// Command plasma-bench runs the seed benchmarks of PlasmaFS against a
// cluster, each beside its reference measured in the same run. See
// 'plasma-bench help'; bench/run drives it.
package main

import (
	"os"

	"github.com/plasmafs/plasma/internal/benchcmd"
)

func main() { os.Exit(benchcmd.Main(os.Args[1:])) }
