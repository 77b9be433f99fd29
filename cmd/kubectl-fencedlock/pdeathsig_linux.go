/*
Copyright 2026 The fencedlock Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import "syscall"

// setParentDeathSignal has the kernel kill the command when run dies, even of SIGKILL: nobody
// renews the lease after that, so the command must not go on believing it holds the lock. SIGKILL,
// not SIGTERM: a command that ignored SIGTERM would outlive the lock.
func setParentDeathSignal(sys *syscall.SysProcAttr) { sys.Pdeathsig = syscall.SIGKILL }
