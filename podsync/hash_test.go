package podsync

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
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

func TestHashContainerEscaping(t *testing.T) {
	// The reference: encoding/json of the map, then fmt's %v of the bytes
	// (decimal, space separated, in brackets) after the type, FNV-32a.
	ref := func(name, image string) uint32 {
		js, _ := json.Marshal(map[string]string{"name": name, "image": image})
		h := fnv.New32a()
		fmt.Fprintf(h, "([]uint8)%v", js)
		return h.Sum32()
	}
	for _, c := range []corev1.Container{{Name: "app", Image: "nginx:1.25"}, {Name: "a", Image: "x<y>&z"}, {Name: "é", Image: "b"},
		{Name: "q\"", Image: "b\\"}, {Name: "long", Image: strings.Repeat("registry.example.com/", 20)}} {
		if got, want := hashContainer(c.Name, c.Image), ref(c.Name, c.Image); got != want {
			t.Errorf("%q %q: %x, want %x", c.Name, c.Image, got, want)
		}
	}
}
