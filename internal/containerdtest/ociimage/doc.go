// Package ociimage writes container images as an OCI image layout in tar
// form, without a registry or any container tool: the images the end-to-end
// tests run are built from local files (a static binary or two) and imported
// into containerd with `ctr images import`.
//
// The OCI documents (index, manifest, config, descriptor) and sha256 digests
// are the package's own small types (spec.go), with the specification's JSON
// field names, so the tests need no image library.
//
// Each image has one uncompressed layer, so its layer digest is its diff ID.
// The index annotates every manifest with io.containerd.image.name (the full
// reference containerd's importer names the image after) and
// org.opencontainers.image.ref.name (the tag). Tar entries carry a fixed
// modification time, so the same input always gives the same digests.
//
// Usage:
//
//	err := ociimage.WriteLayout(w, ociimage.Image{
//		Name:    "localhost/nodekit/busybox:test",
//		Config:  ociimage.ImageConfig{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}},
//		Entries: append([]ociimage.Entry{{Path: "bin/busybox", Data: bin}},
//			ociimage.Links("bin", "/bin/busybox", "sh", "echo")...),
//	})
//
// Limits: one layer per image, held in memory while it is written (fine for
// the few megabytes of a test image); regular files, directories, symlinks
// and hard links only; no compression.
package ociimage
