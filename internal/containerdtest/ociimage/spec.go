package ociimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// The parts of the OCI image format (image-spec v1.1) that an image of one
// uncompressed layer needs: media types, layout file names, and the index,
// manifest, config and descriptor documents. JSON field names and order are
// the specification's.

// Media types.
const (
	MediaTypeImageIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeImageManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeImageConfig   = "application/vnd.oci.image.config.v1+json"
	// MediaTypeImageLayer is an uncompressed tar layer.
	MediaTypeImageLayer = "application/vnd.oci.image.layer.v1.tar"
)

// Layout file and directory names, and the layout version.
const (
	ImageLayoutFile    = "oci-layout"
	ImageLayoutVersion = "1.0.0"
	ImageIndexFile     = "index.json"
	ImageBlobsDir      = "blobs"
)

// AnnotationRefName is the index annotation holding an image's tag.
const AnnotationRefName = "org.opencontainers.image.ref.name"

// Digest is a content digest, "sha256:<64 hex digits>".
type Digest string

// DigestOf returns the sha256 digest of data.
func DigestOf(data []byte) Digest {
	sum := sha256.Sum256(data)
	return Digest("sha256:" + hex.EncodeToString(sum[:]))
}

// Algorithm is the part before the colon ("sha256").
func (d Digest) Algorithm() string {
	alg, _, _ := strings.Cut(string(d), ":")
	return alg
}

// Encoded is the part after the colon (the hex digits).
func (d Digest) Encoded() string {
	_, enc, _ := strings.Cut(string(d), ":")
	return enc
}

// Validate reports whether d is a sha256 digest in canonical form.
func (d Digest) Validate() error {
	enc := d.Encoded()
	if d.Algorithm() != "sha256" || len(enc) != 64 || strings.Trim(enc, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %q: want sha256:<64 lower-case hex digits>", string(d))
	}
	return nil
}

// Platform is the OS and architecture an image runs on.
type Platform struct {
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	OSVersion    string   `json:"os.version,omitempty"`
	OSFeatures   []string `json:"os.features,omitempty"`
	Variant      string   `json:"variant,omitempty"`
}

// Descriptor points at a blob by media type, digest and size.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      Digest            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Index is index.json: the manifests of the layout.
type Index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType,omitempty"`
	Manifests     []Descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Manifest is an image manifest: its config and its layers.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType,omitempty"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// ImageConfig is the runtime configuration of an image: what a container
// made from it runs by default.
type ImageConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	StopSignal   string              `json:"StopSignal,omitempty"`
}

// RootFS lists the diff IDs (digests of the uncompressed layers).
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []Digest `json:"diff_ids"`
}

// ConfigFile is the image configuration blob the manifest's config points at.
type ConfigFile struct {
	Created      *time.Time  `json:"created,omitempty"`
	Author       string      `json:"author,omitempty"`
	Architecture string      `json:"architecture"`
	OS           string      `json:"os"`
	OSVersion    string      `json:"os.version,omitempty"`
	OSFeatures   []string    `json:"os.features,omitempty"`
	Variant      string      `json:"variant,omitempty"`
	Config       ImageConfig `json:"config,omitempty"`
	RootFS       RootFS      `json:"rootfs"`
}

// ImageLayout is the oci-layout file.
type ImageLayout struct {
	Version string `json:"imageLayoutVersion"`
}
