package podsource

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodekit/nodekit/internal/optcheck"
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

// CanonicalNodeName applies kubelet's one rule for a node name (its
// hostname or --hostname-override, see k8s.io/component-helpers'
// GetHostname): white space around it is trimmed and it is lower-cased. The
// result must be a DNS-1123 subdomain. Every option and Origin in this
// package takes a node name through it, so "Node-1" means node "node-1"
// everywhere: in spec.nodeName, the static pod name suffix, the UID hash,
// the API field selector and the mirror pods' owner.
func CanonicalNodeName(name string) (string, error) {
	c := strings.ToLower(strings.TrimSpace(name))
	if c == "" {
		return "", errors.New("required")
	}
	if msgs := validation.IsDNS1123Subdomain(c); len(msgs) > 0 {
		return "", fmt.Errorf("%q: %s", name, msgs[0])
	}
	return c, nil
}

// checkNodeName canonicalises an option's node name in place.
func checkNodeName(opt string, name *string) error {
	if strings.TrimSpace(*name) == "" {
		return optcheck.Required("podsource: " + opt + ".NodeName")
	}
	c, err := CanonicalNodeName(*name)
	if err != nil {
		return fmt.Errorf("podsource: %s.NodeName: %w", opt, err)
	}
	*name = c
	return nil
}

func checkDuration(opt string, d *time.Duration, def, lo, hi time.Duration) error {
	if *d == 0 {
		*d = def
		return nil
	}
	return optcheck.Range("podsource: "+opt, *d, lo, hi)
}

// nodeRef is what events about the node itself point at (kubelet uses the
// node name as the reference's UID).
func nodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}
