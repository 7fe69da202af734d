//go:build !linux

package nodestatus

import (
	"context"
	"errors"
)

// LinuxHostOptions configures NewLinuxHost; see the Linux build.
type LinuxHostOptions struct {
	ProcPath, SysPath, MachineIDPath, OSReleasePath, NodeFSPath, ImageFSPath string
	DisableAddressDetection                                                  bool
}

// LinuxHost is available on Linux only.
type LinuxHost struct{}

// NewLinuxHost returns an error on systems other than Linux.
func NewLinuxHost(LinuxHostOptions) (*LinuxHost, error) {
	return nil, errors.New("nodestatus: the Linux host is available on Linux only")
}

// Facts returns an error on systems other than Linux.
func (*LinuxHost) Facts(context.Context) (*HostFacts, error) {
	return nil, errors.New("nodestatus: the Linux host is available on Linux only")
}

func statFS(string) (FSStats, error) {
	return FSStats{}, errors.New("nodestatus: statfs is implemented on Linux only")
}
