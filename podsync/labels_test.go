package podsync

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestHashContainer(t *testing.T) {
	got := HashContainer(&corev1.Container{Name: "app", Image: "nginx:1.25", Command: []string{"x"}})
	if got != "e324a2d6" {
		t.Fatalf("HashContainer(app, nginx:1.25) = %s, want e324a2d6", got)
	}
	if HashContainer(&corev1.Container{Name: "app", Image: "nginx:1.26"}) == got {
		t.Fatal("image change did not change the hash")
	}
}
