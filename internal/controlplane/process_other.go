//go:build !linux

package controlplane

import "syscall"

// setParentDeathSignal does nothing where there is no parent-death signal:
// a killed test binary leaves its control plane running.
func setParentDeathSignal(*syscall.SysProcAttr) {}
