package clientx

import (
	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientlink"
)

// hooks are package client's functions (set at its init, which runs
// before this package's).
var hooks = clientlink.Get[*client.Client, *client.Txn, *client.File, client.FileInfo]()
