// Package apipath names the resources of API server paths, for the
// metrics and the tests that count an agent's requests.
package apipath

import "strings"

// Resource names the resource of an API path, with its subresource:
// /api/v1/nodes/n/status is "nodes/status", /apis/coordination.k8s.io/v1/
// namespaces/kube-node-lease/leases/n is "leases". Other paths are "other".
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		if len(parts) == 3 && (parts[2] == "status" || parts[2] == "finalize") {
			return "namespaces/" + parts[2]
		}
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "other"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}
