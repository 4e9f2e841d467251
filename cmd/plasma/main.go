// Command plasma is the one binary of PlasmaFS: daemons, cluster
// orchestration and the client commands. See 'plasma help'.
package main

import (
	"os"

	"github.com/plasmafs/plasma/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
