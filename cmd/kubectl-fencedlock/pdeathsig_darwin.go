package main

import "syscall"

// setParentDeathSignal does nothing: macOS has no parent-death signal, so a command whose run is
// killed with SIGKILL goes on running (run forwards every other signal and kills it on loss).
func setParentDeathSignal(*syscall.SysProcAttr) {}
