package bench

import "syscall"

func syncAll() { syscall.Sync() }
