package remote

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// testContainer is a container as containerd lists one: the kubelet's
// labels and annotations.
func testContainer(i int, state runtimeapi.ContainerState) *runtimeapi.Container {
	pod := fmt.Sprintf("pod-%d", i)
	return &runtimeapi.Container{
		Id:           fmt.Sprintf("%064x", i+1),
		PodSandboxId: fmt.Sprintf("%064x", i+1<<32),
		Metadata:     &runtimeapi.ContainerMetadata{Name: "main"},
		Image:        &runtimeapi.ImageSpec{Image: "sha256:" + strings.Repeat("ab", 32)},
		ImageRef:     "sha256:" + strings.Repeat("ab", 32),
		State:        state,
		CreatedAt:    1_700_000_000_000_000_000 + int64(i),
		Labels: map[string]string{
			"io.kubernetes.container.name": "main",
			"io.kubernetes.pod.name":       pod,
			"io.kubernetes.pod.namespace":  "default",
			"io.kubernetes.pod.uid":        fmt.Sprintf("uid-%d", i),
		},
		Annotations: map[string]string{
			"io.kubernetes.container.hash":                     "a1b2c3d4",
			"io.kubernetes.container.restartCount":             "0",
			"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
			"io.kubernetes.container.terminationMessagePolicy": "File",
			"io.kubernetes.pod.terminationGracePeriod":         "30",
		},
	}
}

func encodeContainers(t testing.TB, cs ...*runtimeapi.Container) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&runtimeapi.ListContainersResponse{Containers: cs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListCacheDecodesWhatChanged: an item listed again byte for byte is
// the message returned before; a changed or new one is decoded; a
// complete list keeps only its items, a filtered one keeps nothing new.
func TestListCacheDecodesWhatChanged(t *testing.T) {
	c := newContainerCache()
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	a, b, d := testContainer(0, running), testContainer(1, running), testContainer(2, running)

	first, err := c.decode(encodeContainers(t, a, b, d), true)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*runtimeapi.Container{a, b, d} {
		if !proto.Equal(first[i], want) {
			t.Fatalf("item %d = %v, want %v", i, first[i], want)
		}
	}

	// b exited; d is gone.
	b.State = runtimeapi.ContainerState_CONTAINER_EXITED
	second, err := c.decode(encodeContainers(t, a, b), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 2 || second[0] != first[0] {
		t.Errorf("unchanged item: got %p, want the message of the first list %p", second[0], first[0])
	}
	if second[1] == first[1] || second[1].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("changed item: got %p in state %v, want a new message in state EXITED", second[1], second[1].State)
	}
	if first[1].State != running {
		t.Errorf("the first list's message changed to %v", first[1].State)
	}
	if _, ok := c.items[d.Id]; ok || len(c.items) != 2 {
		t.Errorf("kept %d items (the gone one kept: %v), want the complete list's 2", len(c.items), ok)
	}

	// A filtered list finds what is kept and keeps nothing new.
	e := testContainer(3, running)
	third, err := c.decode(encodeContainers(t, e, a), false)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(third[0], e) || third[1] != first[0] {
		t.Errorf("filtered list = %v, want the new item decoded and the kept one reused", third)
	}
	if _, ok := c.items[e.Id]; ok || len(c.items) != 2 {
		t.Errorf("a filtered list added to the kept items (%d)", len(c.items))
	}

	// An empty complete list empties the cache.
	if got, err := c.decode(nil, true); err != nil || len(got) != 0 || len(c.items) != 0 {
		t.Errorf("empty list = %v, %v, keeps %d", got, err, len(c.items))
	}
}

// TestListCacheUnknownFields: fields other than the items are skipped, and
// an item's ID is found wherever it sits.
func TestListCacheUnknownFields(t *testing.T) {
	c := newContainerCache()
	want := testContainer(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	item, err := proto.Marshal(&runtimeapi.Container{Labels: want.Labels, State: want.State})
	if err != nil {
		t.Fatal(err)
	}
	item = protowire.AppendString(protowire.AppendTag(item, 1, protowire.BytesType), want.Id) // the ID last
	var b []byte
	b = protowire.AppendVarint(protowire.AppendTag(b, 7, protowire.VarintType), 42) // a field a later CRI may add
	b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), item)
	got, err := c.decode(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Id != want.Id || got[0].Labels["io.kubernetes.pod.uid"] != "uid-0" {
		t.Fatalf("decoded %v", got)
	}
	if _, ok := c.items[want.Id]; !ok {
		t.Errorf("item kept under %v, want its ID", c.items)
	}
}

// withLabels encodes c with the labels written in the order given, as a
// runtime on google.golang.org/protobuf writes them in map order.
func withLabels(t *testing.T, c *runtimeapi.Container, labels ...[2]string) []byte {
	t.Helper()
	c = proto.Clone(c).(*runtimeapi.Container)
	c.Labels = nil
	item, err := proto.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range labels {
		var e []byte
		e = protowire.AppendString(protowire.AppendTag(e, 1, protowire.BytesType), kv[0])
		e = protowire.AppendString(protowire.AppendTag(e, 2, protowire.BytesType), kv[1])
		item = protowire.AppendBytes(protowire.AppendTag(item, 8, protowire.BytesType), e)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), item)
}

// TestListCacheMapOrder: the same item with its map entries in another
// order is unchanged; with a key written twice it is decoded each time,
// the last value winning as in a decoder.
func TestListCacheMapOrder(t *testing.T) {
	c := newContainerCache()
	ctr := testContainer(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	uid, name := [2]string{"io.kubernetes.pod.uid", "u"}, [2]string{"io.kubernetes.pod.name", "p"}
	first, err := c.decode(withLabels(t, ctr, uid, name), true)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.decode(withLabels(t, ctr, name, uid), true)
	if err != nil {
		t.Fatal(err)
	}
	if second[0] != first[0] {
		t.Errorf("the same item with its labels in another order was decoded again")
	}
	other := [2]string{"io.kubernetes.pod.name", "q"}
	third, err := c.decode(withLabels(t, ctr, name, uid, other), true)
	if err != nil {
		t.Fatal(err)
	}
	fourth, err := c.decode(withLabels(t, ctr, other, uid, name), true)
	if err != nil {
		t.Fatal(err)
	}
	if third[0] == first[0] || third[0].Labels["io.kubernetes.pod.name"] != "q" {
		t.Errorf("a key written twice: %v, want decoded, the last value", third[0].Labels)
	}
	if fourth[0] == third[0] || fourth[0].Labels["io.kubernetes.pod.name"] != "p" {
		t.Errorf("the key written twice the other way: %v, want decoded again, the last value", fourth[0].Labels)
	}
}

// TestListCacheBadInput: a malformed response is an error naming the item
// where it is in one, and the kept items stay as they were.
func TestListCacheBadInput(t *testing.T) {
	c := newContainerCache()
	good := encodeContainers(t, testContainer(0, runtimeapi.ContainerState_CONTAINER_RUNNING))
	if _, err := c.decode(good, true); err != nil {
		t.Fatal(err)
	}
	badItem := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendTag(nil, 6, protowire.BytesType)) // a field with no length
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"truncated list":     {good[:len(good)-3], "unexpected EOF"},
		"truncated tag":      {[]byte{0x80}, "unexpected EOF"},
		"malformed item":     {append(append([]byte{}, good...), badItem...), "item 1"},
		"reserved wire type": {[]byte{0x0f}, "reserved wire type"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.decode(tc.data, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode = %v, want an error with %q", err, tc.want)
			}
			if len(c.items) != 1 {
				t.Errorf("kept items after a bad list: %d, want the last good list's 1", len(c.items))
			}
		})
	}
}

// BenchmarkListContainers decodes a list of 250 running containers as a
// relist finds them each second: all of it (proto.Unmarshal, as without
// the cache) and through the cache with one container changed.
func BenchmarkListContainers(b *testing.B) {
	cs := make([]*runtimeapi.Container, 250)
	for i := range cs {
		cs[i] = testContainer(i, runtimeapi.ContainerState_CONTAINER_RUNNING)
	}
	data := encodeContainers(b, cs...)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(data, new(runtimeapi.ListContainersResponse)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := newContainerCache()
		if _, err := c.decode(data, true); err != nil {
			b.Fatal(err)
		}
		cs[0].State = runtimeapi.ContainerState_CONTAINER_EXITED
		changed := encodeContainers(b, cs...)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := data
			if i%2 == 1 {
				d = changed
			}
			i++
			if _, err := c.decode(d, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
