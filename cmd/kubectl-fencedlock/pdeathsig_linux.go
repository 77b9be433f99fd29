package main

import "syscall"

// setParentDeathSignal has the kernel kill the command when run dies, even of SIGKILL: nobody
// renews the lease after that, so the command must not go on believing it holds the lock. SIGKILL,
// not SIGTERM: a command that ignored SIGTERM would outlive the lock.
func setParentDeathSignal(sys *syscall.SysProcAttr) { sys.Pdeathsig = syscall.SIGKILL }
