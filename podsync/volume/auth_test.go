package volume

import (
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pullSecret(name string, typ corev1.SecretType, key, data string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Type: typ, Data: map[string][]byte{key: []byte(data)}}
}

func TestParsePullSecret(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("bob:pw"))
	creds, err := ParsePullSecret(pullSecret("s", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey,
		`{"auths":{"https://index.docker.io/v1/":{"auth":"`+auth+`"},"registry.example.com:5000":{"username":"u","password":"p"}}}`))
	if err != nil || len(creds) != 2 {
		t.Fatalf("%v %v", creds, err)
	}
	byKey := map[string]Credential{}
	for _, c := range creds {
		byKey[c.Key] = c
	}
	if c := byKey["index.docker.io"]; c.Username != "bob" || c.Password != "pw" || c.Auth != auth {
		t.Errorf("Docker Hub entry %+v", c)
	}
	if c := byKey["registry.example.com:5000"]; c.Username != "u" || c.Password != "p" {
		t.Errorf("registry entry %+v", c)
	}
	creds, err = ParsePullSecret(pullSecret("s", corev1.SecretTypeDockercfg, corev1.DockerConfigKey, `{"quay.io":{"username":"q","password":"r"}}`))
	if err != nil || len(creds) != 1 || creds[0].Key != "quay.io" || creds[0].Username != "q" {
		t.Errorf("dockercfg: %+v %v", creds, err)
	}
	if _, err := ParsePullSecret(pullSecret("s", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{not json`)); err == nil {
		t.Error("bad JSON accepted")
	}
	if creds, err := ParsePullSecret(pullSecret("s", corev1.SecretTypeOpaque, "x", "y")); creds != nil || err != nil {
		t.Errorf("opaque secret: %v %v", creds, err)
	}
}

func TestAuthFor(t *testing.T) {
	creds := []Credential{
		{Key: "index.docker.io", Username: "hub"},
		{Key: "registry.example.com", Username: "any"},
		{Key: "registry.example.com/team", Username: "team"},
		{Key: "*.corp.example", Username: "glob"},
		{Key: "local:5000", Username: "port"},
	}
	for image, want := range map[string]string{
		"busybox":                              "hub",
		"library/busybox:1.36":                 "hub",
		"docker.io/library/busybox@sha256:abc": "hub",
		"registry.example.com/app:1":           "any",
		"registry.example.com/team/app:1":      "team",
		"registry.example.com/teamwork/app":    "any",
		"eu.corp.example/x/y":                  "glob",
		"a.eu.corp.example/x":                  "",
		"local:5000/img":                       "port",
		"local/img":                            "hub",
		"quay.io/app":                          "",
		"registry.example.com:443/team/app":    "",
	} {
		a := AuthFor(creds, image)
		got := ""
		if len(a) > 0 {
			got = a[0].Username
		}
		if got != want {
			t.Errorf("%s: credential %q, want %q", image, got, want)
		}
	}
	// Every covering credential, the most specific first.
	a := AuthFor(creds, "registry.example.com/team/app")
	if len(a) != 2 || a[0].Username != "team" || a[1].Username != "any" || a[0].ServerAddress != "registry.example.com" {
		t.Errorf("credentials %+v, want team then any, for registry.example.com", a)
	}
}

// The pod's pull secrets, read through the Manager's watches; a missing
// one is skipped.
func TestPullAuth(t *testing.T) {
	f := newFixture(t, nil, pullSecret("reg", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":{"registry.example.com":{"username":"u","password":"p"}}}`))
	pod := newPod("web")
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "missing"}, {Name: "reg"}}
	if err := f.setUp(pod); err != nil {
		t.Fatal(err)
	}
	if a := f.m.PullAuth(pod, "registry.example.com/app:1"); len(a) != 1 || a[0].Username != "u" || a[0].Password != "p" {
		t.Errorf("PullAuth: %+v", a)
	}
	if a := f.m.PullAuth(pod, "busybox"); a != nil {
		t.Errorf("PullAuth for another registry: %+v", a)
	}
}
