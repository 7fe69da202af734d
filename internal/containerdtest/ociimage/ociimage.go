package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// AnnotationImageName is the index annotation containerd's importer reads the
// full image reference from.
const AnnotationImageName = "io.containerd.image.name"

// epoch is the modification time of every tar entry, so the same input gives
// the same digests.
var epoch = time.Unix(0, 0).UTC()

// Entry is one file, directory or link in an image's single layer.
type Entry struct {
	// Path inside the image, without a leading slash ("bin/sh").
	Path string
	// Type is a tar type flag: tar.TypeReg (the default when zero),
	// tar.TypeDir, tar.TypeSymlink or tar.TypeLink.
	Type byte
	// Mode is the permission bits; default 0o755 for directories and
	// executables given as Data, 0o777 for symlinks.
	Mode int64
	// Data is the content of a regular file.
	Data []byte
	// Linkname is the target of a symlink, or for a hard link the Path of the
	// entry it links to.
	Linkname string
}

// Image is an image of one uncompressed layer.
type Image struct {
	// Name is the full reference, e.g. "localhost/nodekit/pause:test"; required.
	Name string
	// OS and Architecture of the platform; default runtime.GOOS and
	// runtime.GOARCH.
	OS, Architecture string
	// Config is the runtime configuration (Env, Entrypoint, Cmd, ...).
	Config ImageConfig
	// Entries make up the layer, written in this order. Parent directories
	// that are not listed are added before their first child.
	Entries []Entry
}

// WriteLayout writes the given images as one OCI image layout in tar form to
// w: oci-layout, index.json (one manifest per image, annotated with its name)
// and the blobs. The output is deterministic for the same input.
func WriteLayout(w io.Writer, images ...Image) error {
	if len(images) == 0 {
		return errors.New("ociimage: no images")
	}
	tw := tar.NewWriter(w)
	blobs := map[Digest]bool{}
	if err := writeDir(tw, ImageBlobsDir+"/"); err != nil {
		return err
	}
	if err := writeDir(tw, ImageBlobsDir+"/sha256/"); err != nil {
		return err
	}
	addBlob := func(data []byte) (Digest, error) {
		d := DigestOf(data)
		if blobs[d] {
			return d, nil
		}
		blobs[d] = true
		return d, writeFile(tw, path.Join(ImageBlobsDir, d.Algorithm(), d.Encoded()), data)
	}

	index := Index{
		SchemaVersion: 2,
		MediaType:     MediaTypeImageIndex,
	}
	for i, img := range images {
		desc, err := writeImage(img, addBlob)
		if err != nil {
			return fmt.Errorf("ociimage: image %d (%q): %w", i, img.Name, err)
		}
		index.Manifests = append(index.Manifests, desc)
	}

	layout, err := json.Marshal(ImageLayout{Version: ImageLayoutVersion})
	if err != nil {
		return err
	}
	if err := writeFile(tw, ImageLayoutFile, layout); err != nil {
		return err
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := writeFile(tw, ImageIndexFile, indexJSON); err != nil {
		return err
	}
	return tw.Close()
}

func writeImage(img Image, addBlob func([]byte) (Digest, error)) (Descriptor, error) {
	if img.Name == "" {
		return Descriptor{}, errors.New("Name is empty")
	}
	osName, arch := img.OS, img.Architecture
	if osName == "" {
		osName = runtime.GOOS
	}
	if arch == "" {
		arch = runtime.GOARCH
	}

	layer, err := Layer(img.Entries)
	if err != nil {
		return Descriptor{}, err
	}
	layerDigest, err := addBlob(layer)
	if err != nil {
		return Descriptor{}, err
	}

	created := epoch
	config, err := json.Marshal(ConfigFile{
		Created:      &created,
		Architecture: arch,
		OS:           osName,
		Config:       img.Config,
		RootFS:       RootFS{Type: "layers", DiffIDs: []Digest{layerDigest}},
	})
	if err != nil {
		return Descriptor{}, err
	}
	configDigest, err := addBlob(config)
	if err != nil {
		return Descriptor{}, err
	}

	manifest, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeImageManifest,
		Config:        Descriptor{MediaType: MediaTypeImageConfig, Digest: configDigest, Size: int64(len(config))},
		Layers:        []Descriptor{{MediaType: MediaTypeImageLayer, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return Descriptor{}, err
	}
	manifestDigest, err := addBlob(manifest)
	if err != nil {
		return Descriptor{}, err
	}

	annotations := map[string]string{AnnotationImageName: img.Name}
	if tag := tagOf(img.Name); tag != "" {
		annotations[AnnotationRefName] = tag
	}
	return Descriptor{
		MediaType:   MediaTypeImageManifest,
		Digest:      manifestDigest,
		Size:        int64(len(manifest)),
		Annotations: annotations,
		Platform:    &Platform{OS: osName, Architecture: arch},
	}, nil
}

// Layer returns the uncompressed tar of entries, with missing parent
// directories added. Its sha256 digest is both the layer digest and the diff
// ID.
func Layer(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	var ensureDir func(dir string) error
	ensureDir = func(dir string) error {
		if dir == "." || dir == "" || seen[dir] {
			return nil
		}
		if err := ensureDir(path.Dir(dir)); err != nil {
			return err
		}
		seen[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	for _, e := range entries {
		name := path.Clean(strings.TrimPrefix(e.Path, "/"))
		if name == "." || strings.HasPrefix(name, "../") || name == ".." {
			return nil, fmt.Errorf("entry path %q is not inside the image", e.Path)
		}
		if seen[name] {
			return nil, fmt.Errorf("entry %q appears twice", name)
		}
		if err := ensureDir(path.Dir(name)); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: name, Mode: e.Mode, ModTime: epoch, Format: tar.FormatPAX}
		switch e.Type {
		case tar.TypeReg, 0:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Data))
			if hdr.Mode == 0 {
				hdr.Mode = 0o755
			}
		case tar.TypeDir:
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if hdr.Mode == 0 {
				hdr.Mode = 0o755
			}
		case tar.TypeSymlink:
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = e.Linkname
			if hdr.Mode == 0 {
				hdr.Mode = 0o777
			}
		case tar.TypeLink:
			target := path.Clean(strings.TrimPrefix(e.Linkname, "/"))
			if !seen[target] {
				return nil, fmt.Errorf("hard link %q to %q, which is not an earlier entry", name, e.Linkname)
			}
			hdr.Typeflag = tar.TypeLink
			hdr.Linkname = target
		default:
			return nil, fmt.Errorf("entry %q: unsupported type %q", name, e.Type)
		}
		if (e.Type == tar.TypeSymlink || e.Type == tar.TypeLink) && e.Linkname == "" {
			return nil, fmt.Errorf("link %q has no Linkname", name)
		}
		seen[name] = true
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Links returns one symlink entry per name, each at dir/name pointing to
// target, sorted by name and without duplicates.
func Links(dir, target string, names ...string) []Entry {
	names = append([]string(nil), names...)
	sort.Strings(names)
	var out []Entry
	for i, n := range names {
		if n == "" || (i > 0 && names[i-1] == n) {
			continue
		}
		out = append(out, Entry{Path: path.Join(dir, n), Type: tar.TypeSymlink, Linkname: target})
	}
	return out
}

// tagOf returns the tag of a reference ("test" for "localhost/x/y:test"), or
// "" when it has none.
func tagOf(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndexByte(ref, '/')
	colon := strings.LastIndexByte(ref, ':')
	if colon > slash {
		return ref[colon+1:]
	}
	return ""
}

func writeDir(tw *tar.Writer, name string) error {
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
}

func writeFile(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
