package volume

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Credential is one registry credential from a pull secret.
type Credential struct {
	// Key is the registry as the secret names it, normalized: host[:port]
	// and an optional path, without scheme ("index.docker.io" for Docker
	// Hub's "https://index.docker.io/v1/").
	Key string
	// Username, Password, Auth (base64 of user:password), IdentityToken and
	// RegistryToken as in a Docker config.
	Username, Password, Auth, IdentityToken, RegistryToken string
}

type dockerEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	Email         string `json:"email,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// ParsePullSecret reads the credentials of a kubernetes.io/dockerconfigjson
// (.dockerconfigjson: {"auths": {...}}) or kubernetes.io/dockercfg
// (.dockercfg: {...}) Secret. Other types hold none.
func ParsePullSecret(s *corev1.Secret) ([]Credential, error) {
	var entries map[string]dockerEntry
	switch {
	case s.Type == corev1.SecretTypeDockerConfigJson || (s.Type == "" && s.Data[corev1.DockerConfigJsonKey] != nil):
		var cfg struct {
			Auths map[string]dockerEntry `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
			return nil, fmt.Errorf("secret %s/%s: %s: %w", s.Namespace, s.Name, corev1.DockerConfigJsonKey, err)
		}
		entries = cfg.Auths
	case s.Type == corev1.SecretTypeDockercfg || (s.Type == "" && s.Data[corev1.DockerConfigKey] != nil):
		if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &entries); err != nil {
			return nil, fmt.Errorf("secret %s/%s: %s: %w", s.Namespace, s.Name, corev1.DockerConfigKey, err)
		}
	default:
		return nil, nil
	}
	out := make([]Credential, 0, len(entries))
	for k, e := range entries {
		c := Credential{Key: normalizeRegistry(k), Username: e.Username, Password: e.Password, Auth: e.Auth,
			IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
		if c.Username == "" && c.Password == "" && c.Auth != "" {
			if b, err := base64.StdEncoding.DecodeString(c.Auth); err == nil {
				if u, p, ok := strings.Cut(string(b), ":"); ok {
					c.Username, c.Password = u, p
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// Docker Hub's names.
const (
	dockerHubIndex = "index.docker.io"
	dockerHub      = "docker.io"
)

// normalizeRegistry turns a Docker config key into host[:port][/path]:
// scheme and a trailing /v1/ or /v2/ are dropped; docker.io is
// index.docker.io.
func normalizeRegistry(k string) string {
	if strings.Contains(k, "://") {
		if u, err := url.Parse(k); err == nil {
			k = u.Host + u.Path
		}
	}
	k = strings.TrimSuffix(k, "/")
	for _, v := range []string{"/v1", "/v2"} {
		k = strings.TrimSuffix(k, v)
	}
	if k == dockerHub || strings.HasPrefix(k, dockerHub+"/") {
		k = dockerHubIndex + strings.TrimPrefix(k, dockerHub)
	}
	return k
}

// imageRepository is the registry host and repository path of an image
// reference: "busybox" is index.docker.io/library/busybox.
func imageRepository(image string) (host, repo string) {
	name := image
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i >= 0 && !strings.Contains(name[i:], "/") {
		name = name[:i]
	}
	first, rest, found := strings.Cut(name, "/")
	if !found || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !found {
			return dockerHubIndex, "library/" + name
		}
		return dockerHubIndex, name
	}
	if first == dockerHub {
		first = dockerHubIndex
	}
	return first, rest
}

// matches reports whether key (host[:port][/path], host labels may be
// globs like *.example.com) covers the image.
func matches(key, image string) bool {
	host, repo := imageRepository(image)
	kHost, kPath, _ := strings.Cut(key, "/")
	kh, kp, _ := strings.Cut(kHost, ":")
	ih, ip, _ := strings.Cut(host, ":")
	if kp != ip {
		return false
	}
	kl, il := strings.Split(kh, "."), strings.Split(ih, ".")
	if len(kl) != len(il) {
		return false
	}
	for i := range kl {
		if ok, err := path.Match(kl[i], il[i]); err != nil || !ok {
			return false
		}
	}
	return kPath == "" || repo == kPath || strings.HasPrefix(repo, kPath+"/")
}

// AuthFor returns the credentials whose registry key covers image, the
// most specific key first (the order the kubelet tries them in), each with
// the image's registry as ServerAddress; nil when none does.
func AuthFor(creds []Credential, image string) []*runtimeapi.AuthConfig {
	var found []Credential
	for _, c := range creds {
		if matches(c.Key, image) {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		return nil
	}
	sort.SliceStable(found, func(i, j int) bool { return len(found[i].Key) > len(found[j].Key) })
	host, _ := imageRepository(image)
	out := make([]*runtimeapi.AuthConfig, len(found))
	for i, c := range found {
		out[i] = &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password, Auth: c.Auth, ServerAddress: host,
			IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken}
	}
	return out
}
