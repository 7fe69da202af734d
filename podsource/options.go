package podsource

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Default periods and their bounds.
const (
	// DefaultPeriod is how often the file source re-lists and the HTTP
	// source fetches: 20s, as kubelet.
	DefaultPeriod = 20 * time.Second
	// MinPeriod and MaxPeriod bound every Period option.
	MinPeriod = time.Second
	MaxPeriod = 24 * time.Hour
	// DefaultHTTPTimeout bounds one manifest URL fetch: 10s, as kubelet.
	DefaultHTTPTimeout = 10 * time.Second
	// MinHTTPTimeout and MaxHTTPTimeout bound HTTPOptions.Timeout.
	MinHTTPTimeout = 10 * time.Millisecond
	MaxHTTPTimeout = 5 * time.Minute
)

// Event reasons for manifests.
const (
	// ReasonInvalidManifest: a manifest could not be read or is invalid.
	ReasonInvalidManifest = "InvalidManifest"
)

func checkNodeName(opt, name string) error {
	if name == "" {
		return fmt.Errorf("podsource: %s.NodeName: required", opt)
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("podsource: %s.NodeName %q: %s", opt, name, msgs[0])
	}
	return nil
}

func checkDuration(opt string, d *time.Duration, def, lo, hi time.Duration) error {
	if *d == 0 {
		*d = def
		return nil
	}
	if *d < lo || *d > hi {
		return fmt.Errorf("podsource: %s: %v is outside [%v, %v]", opt, *d, lo, hi)
	}
	return nil
}

// nodeRef is what events about the node itself point at (kubelet uses the
// node name as the reference's UID).
func nodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}
