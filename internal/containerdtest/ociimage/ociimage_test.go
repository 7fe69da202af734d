package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// readTar returns the regular files and all entry names of a tar stream.
func readTar(t *testing.T, data []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[hdr.Name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = b
		}
	}
	return files, headers
}

func blob(t *testing.T, files map[string][]byte, d Digest) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+d.Encoded()]
	if !ok {
		t.Fatalf("blob %s missing", d)
	}
	if got := DigestOf(b); got != d {
		t.Fatalf("blob %s has digest %s", d, got)
	}
	return b
}

func TestWriteLayout(t *testing.T) {
	images := []Image{
		{
			Name:         "localhost/nodekit/a:test",
			OS:           "linux",
			Architecture: "amd64",
			Config:       ImageConfig{Env: []string{"PATH=/bin"}, Cmd: []string{"sh"}},
			Entries: append([]Entry{
				{Path: "/bin/busybox", Data: []byte("binary")},
				{Path: "tmp", Type: tar.TypeDir, Mode: 0o1777},
				{Path: "bin/hard", Type: tar.TypeLink, Linkname: "/bin/busybox"},
			}, Links("bin", "/bin/busybox", "sh", "echo", "sh")...),
		},
		{Name: "localhost/nodekit/b@sha256:" + strings.Repeat("0", 64), Entries: []Entry{{Path: "pause", Data: []byte("p")}}},
	}
	var buf bytes.Buffer
	if err := WriteLayout(&buf, images...); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteLayout(&again, images...); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two writes of the same images differ")
	}

	files, _ := readTar(t, buf.Bytes())
	var layout ImageLayout
	if err := json.Unmarshal(files["oci-layout"], &layout); err != nil || layout.Version != ImageLayoutVersion {
		t.Fatalf("oci-layout = %q, %v", files["oci-layout"], err)
	}
	var index Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if index.SchemaVersion != 2 || len(index.Manifests) != 2 {
		t.Fatalf("index = %+v", index)
	}
	wantTags := []string{"test", ""}
	for i, desc := range index.Manifests {
		if got := desc.Annotations[AnnotationImageName]; got != images[i].Name {
			t.Errorf("manifest %d name annotation = %q, want %q", i, got, images[i].Name)
		}
		if got := desc.Annotations[AnnotationRefName]; got != wantTags[i] {
			t.Errorf("manifest %d ref.name = %q, want %q", i, got, wantTags[i])
		}
		if desc.Platform == nil || desc.Platform.OS == "" || desc.Platform.Architecture == "" {
			t.Errorf("manifest %d platform = %+v", i, desc.Platform)
		}
		var m Manifest
		if err := json.Unmarshal(blob(t, files, desc.Digest), &m); err != nil {
			t.Fatal(err)
		}
		if m.MediaType != MediaTypeImageManifest || len(m.Layers) != 1 || m.Layers[0].MediaType != MediaTypeImageLayer {
			t.Fatalf("manifest %d = %+v", i, m)
		}
		var cfg ConfigFile
		if err := json.Unmarshal(blob(t, files, m.Config.Digest), &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != m.Layers[0].Digest || cfg.RootFS.Type != "layers" {
			t.Errorf("config %d rootfs = %+v, layer %s", i, cfg.RootFS, m.Layers[0].Digest)
		}
		layer := blob(t, files, m.Layers[0].Digest)
		if int64(len(layer)) != m.Layers[0].Size {
			t.Errorf("layer %d size %d, descriptor says %d", i, len(layer), m.Layers[0].Size)
		}
		if i == 0 {
			if cfg.OS != "linux" || cfg.Architecture != "amd64" || cfg.Config.Cmd[0] != "sh" {
				t.Errorf("config 0 = %+v", cfg)
			}
			lf, lh := readTar(t, layer)
			if string(lf["bin/busybox"]) != "binary" {
				t.Errorf("bin/busybox = %q", lf["bin/busybox"])
			}
			if h := lh["bin/"]; h == nil || h.Typeflag != tar.TypeDir {
				t.Errorf("bin/ not added as a directory: %+v", h)
			}
			if h := lh["bin/sh"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/bin/busybox" {
				t.Errorf("bin/sh = %+v", h)
			}
			if h := lh["bin/hard"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "bin/busybox" {
				t.Errorf("bin/hard = %+v", h)
			}
			if h := lh["tmp/"]; h == nil || h.Mode != 0o1777 {
				t.Errorf("tmp/ = %+v", h)
			}
		}
	}
}

func TestWriteLayoutErrors(t *testing.T) {
	for name, img := range map[string]Image{
		"no name":          {Entries: []Entry{{Path: "a"}}},
		"twice":            {Name: "x:y", Entries: []Entry{{Path: "a"}, {Path: "/a"}}},
		"outside":          {Name: "x:y", Entries: []Entry{{Path: "../a"}}},
		"dangling hard":    {Name: "x:y", Entries: []Entry{{Path: "a", Type: tar.TypeLink, Linkname: "b"}}},
		"symlink no name":  {Name: "x:y", Entries: []Entry{{Path: "a", Type: tar.TypeSymlink}}},
		"unsupported type": {Name: "x:y", Entries: []Entry{{Path: "a", Type: tar.TypeFifo}}},
	} {
		if err := WriteLayout(io.Discard, img); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := WriteLayout(io.Discard); err == nil {
		t.Error("no images: no error")
	}
}

func TestDigest(t *testing.T) {
	d := DigestOf(nil)
	if d != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("digest of nothing = %s", d)
	}
	if d.Algorithm() != "sha256" || d.Encoded() != string(d)[len("sha256:"):] || d.Validate() != nil {
		t.Fatalf("%s: algorithm %q, encoded %q, validate %v", d, d.Algorithm(), d.Encoded(), d.Validate())
	}
	for _, bad := range []Digest{"", "sha256:", "sha512:" + Digest(d.Encoded()), "sha256:" + Digest(strings.ToUpper(d.Encoded())), d + "0"} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%q) = nil", bad)
		}
	}
}
