package nodekit

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NodeName is the name a node registers under, as the kubelet chooses it:
// override (its --hostname-override) when given, else the host's name,
// trimmed and lower-cased. It must be a DNS-1123 subdomain.
func NodeName(override string) (string, error) {
	name := override
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("nodekit: host name: %w", err)
		}
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("nodekit: node name %q: %s", name, strings.Join(errs, "; "))
	}
	return name, nil
}
