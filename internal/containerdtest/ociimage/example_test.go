package ociimage_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"

	"github.com/nodekit/nodekit/internal/containerdtest/ociimage"
)

func ExampleWriteLayout() {
	var buf bytes.Buffer
	err := ociimage.WriteLayout(&buf, ociimage.Image{
		Name:   "localhost/example/hello:v1",
		Config: ociimage.ImageConfig{Entrypoint: []string{"/hello"}},
		Entries: []ociimage.Entry{
			{Path: "hello", Data: []byte("#!/bin/sh\necho hello\n")},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The archive holds the layout file, the index and three blobs (layer,
	// config, manifest); `ctr images import` reads it as it is.
	tr := tar.NewReader(&buf)
	blobs := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if hdr.Typeflag == tar.TypeReg && len(hdr.Name) > len("blobs/sha256/") && hdr.Name[:13] == "blobs/sha256/" {
			blobs++
			continue
		}
		fmt.Println(hdr.Name)
	}
	fmt.Println(blobs, "blobs")
	// Output:
	// blobs/
	// blobs/sha256/
	// oci-layout
	// index.json
	// 3 blobs
}
