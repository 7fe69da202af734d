package controlplane

import "syscall"

// setParentDeathSignal has the kernel send SIGKILL to the child when the
// thread that started it ends, so a control plane does not outlive a test
// binary that was killed.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
