package containerdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/containerdtest/ociimage"
)

// ImportBusyboxAs imports a copy of the busybox image as ref whose image
// configuration runs as user ("1000", "nobody", "0:0"), for tests of what a
// node does with an image's user. The image goes with the containerd.
func (c *Containerd) ImportBusyboxAs(ctx context.Context, ref, user string) error {
	busybox, err := os.ReadFile(c.bins.busybox)
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	list, err := exec.CommandContext(ctx, c.bins.busybox, "--list-full").Output()
	if err != nil {
		list = nil
	}
	var buf bytes.Buffer
	if err := ociimage.WriteLayout(&buf, ociimage.Image{
		Name:    ref,
		Config:  ociimage.ImageConfig{Env: []string{imagePath}, Cmd: []string{"sh"}, User: user},
		Entries: busyboxEntries(busybox, string(list)),
	}); err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	layout, err := os.CreateTemp(c.Dir, "image-*.tar")
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	defer os.Remove(layout.Name())
	if _, err := layout.Write(buf.Bytes()); err != nil {
		layout.Close()
		return fmt.Errorf("containerdtest: %w", err)
	}
	if err := layout.Close(); err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	cmd := exec.CommandContext(ctx, c.bins.ctr, "--address", c.Address, "--namespace", c.Namespace,
		"images", "import", "--snapshotter", c.Snapshotter, filepath.Clean(layout.Name()))
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("containerdtest: ctr images import: %w\n%s", err, output)
	}
	return nil
}
