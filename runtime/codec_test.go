package runtime

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func randString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789-./:_é世"
	rs := []rune(chars)
	n := r.IntN(20)
	out := make([]rune, n)
	for i := range out {
		out[i] = rs[r.IntN(len(rs))]
	}
	return string(out)
}

func randMap(r *rand.Rand) map[string]string {
	if r.IntN(3) == 0 {
		return nil
	}
	m := map[string]string{}
	for range r.IntN(6) {
		m[randString(r)] = randString(r)
	}
	return m
}

func randImage(r *rand.Rand) *runtimeapi.ImageSpec {
	if r.IntN(5) == 0 {
		return nil
	}
	return &runtimeapi.ImageSpec{Image: randString(r), Annotations: randMap(r), UserSpecifiedImage: randString(r),
		RuntimeHandler: randString(r), ImageRef: randString(r)}
}

func randMetadata(r *rand.Rand) *runtimeapi.ContainerMetadata {
	if r.IntN(5) == 0 {
		return nil
	}
	return &runtimeapi.ContainerMetadata{Name: randString(r), Attempt: r.Uint32()}
}

func randContainer(r *rand.Rand) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id: randString(r), PodSandboxId: randString(r), Metadata: randMetadata(r), Image: randImage(r),
		ImageRef: randString(r), State: runtimeapi.ContainerState(r.IntN(5) - 1), CreatedAt: r.Int64() - r.Int64(),
		Labels: randMap(r), Annotations: randMap(r), ImageId: randString(r),
	}
}

func randStatus(r *rand.Rand) *runtimeapi.ContainerStatus {
	s := &runtimeapi.ContainerStatus{
		Id: randString(r), Metadata: randMetadata(r), State: runtimeapi.ContainerState(r.IntN(4)),
		CreatedAt: r.Int64(), StartedAt: r.Int64() - r.Int64(), FinishedAt: r.Int64(), ExitCode: int32(r.Uint32()),
		Image: randImage(r), ImageRef: randString(r), Reason: randString(r), Message: randString(r),
		Labels: randMap(r), Annotations: randMap(r), LogPath: randString(r), ImageId: randString(r),
		StopSignal: runtimeapi.Signal(r.IntN(10)),
	}
	for range r.IntN(3) {
		m := &runtimeapi.Mount{ContainerPath: randString(r), HostPath: randString(r), Readonly: r.IntN(2) == 0,
			SelinuxRelabel: r.IntN(2) == 0, Propagation: runtimeapi.MountPropagation(r.IntN(3)),
			RecursiveReadOnly: r.IntN(2) == 0, Image: randImage(r), ImageSubPath: randString(r)}
		for range r.IntN(2) {
			m.UidMappings = append(m.UidMappings, &runtimeapi.IDMapping{HostId: r.Uint32(), ContainerId: r.Uint32(), Length: r.Uint32()})
			m.GidMappings = append(m.GidMappings, &runtimeapi.IDMapping{HostId: r.Uint32(), Length: 1})
			m.MountOptions = append(m.MountOptions, randString(r))
		}
		s.Mounts = append(s.Mounts, m)
	}
	if r.IntN(3) == 0 {
		s.Resources = &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 2, MemoryLimitInBytes: r.Int64(), CpusetCpus: randString(r)}}
	}
	if r.IntN(3) == 0 {
		s.User = &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 1000, SupplementalGroups: []int64{1, 2, 3}}}
	}
	return s
}

// check decodes data with the fast codec and with proto.Unmarshal and
// compares the results.
func check(t *testing.T, data []byte, newMsg func() proto.Message) {
	t.Helper()
	want := newMsg()
	wantErr := proto.Unmarshal(data, want)
	got := newMsg()
	gotErr := newCRICodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("errors differ: fast %v, standard %v", gotErr, wantErr)
	}
	if wantErr == nil && !proto.Equal(got, want) {
		t.Fatalf("fast decode differs:\n got %v\nwant %v", got, want)
	}
}

func TestFastDecoderMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			list := &runtimeapi.ListContainersResponse{}
			for range r.IntN(5) {
				list.Containers = append(list.Containers, randContainer(r))
			}
			data, _ := proto.Marshal(list)
			check(t, data, func() proto.Message { return &runtimeapi.ListContainersResponse{} })

			st := &runtimeapi.ContainerStatusResponse{Info: randMap(r)}
			if r.IntN(6) > 0 {
				st.Status = randStatus(r)
			}
			data, _ = proto.Marshal(st)
			check(t, data, func() proto.Message { return &runtimeapi.ContainerStatusResponse{} })

			ex := &runtimeapi.ExecSyncResponse{Stdout: []byte(randString(r)), Stderr: []byte{0xff, 0, 1}, ExitCode: int32(r.Uint32())}
			data, _ = proto.Marshal(ex)
			check(t, data, func() proto.Message { return &runtimeapi.ExecSyncResponse{} })
		})
	}
}

func TestFastDecoderSlowPaths(t *testing.T) {
	c := &runtimeapi.Container{Id: "abc", Metadata: &runtimeapi.ContainerMetadata{Name: "x"}}
	base, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{c}})
	inner, _ := proto.Marshal(c)
	newList := func() proto.Message { return &runtimeapi.ListContainersResponse{} }

	// An unknown field in a container is kept, as the standard decoder keeps it.
	unknown := protowire.AppendTag(append([]byte(nil), inner...), 99, protowire.BytesType)
	unknown = protowire.AppendString(unknown, "future")
	withUnknown := protowire.AppendTag(nil, 1, protowire.BytesType)
	withUnknown = protowire.AppendBytes(withUnknown, unknown)
	check(t, withUnknown, newList)
	var got runtimeapi.ListContainersResponse
	_ = newCRICodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(withUnknown)}, &got)
	if len(got.Containers[0].ProtoReflect().GetUnknown()) == 0 {
		t.Error("unknown field dropped")
	}

	// A sub-message twice is merged.
	twice := append([]byte(nil), inner...)
	twice = protowire.AppendTag(twice, 3, protowire.BytesType)
	md, _ := proto.Marshal(&runtimeapi.ContainerMetadata{Attempt: 4})
	twice = protowire.AppendBytes(twice, md)
	list := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), twice)
	check(t, list, newList)

	// Invalid UTF-8 in a string is an error, as it is for the standard decoder.
	bad := protowire.AppendTag(nil, 1, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0xff, 0xfe})
	check(t, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), bad), newList)

	// Truncated input.
	check(t, base[:len(base)-1], newList)
	// Empty input.
	check(t, nil, newList)
	// A fixed64 field.
	check(t, protowire.AppendFixed64(protowire.AppendTag(nil, 7, protowire.Fixed64Type), 1), func() proto.Message { return &runtimeapi.ExecSyncResponse{} })
}

func FuzzFastDecoder(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5 {
		data, _ := proto.Marshal(&runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{randContainer(r)}})
		f.Add(data)
		data, _ = proto.Marshal(&runtimeapi.ContainerStatusResponse{Status: randStatus(r)})
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data, func() proto.Message { return &runtimeapi.ListContainersResponse{} })
		check(t, data, func() proto.Message { return &runtimeapi.ContainerStatusResponse{} })
		check(t, data, func() proto.Message { return &runtimeapi.ExecSyncResponse{} })
	})
}

func BenchmarkDecodeListContainers(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	list := &runtimeapi.ListContainersResponse{}
	for range 100 {
		list.Containers = append(list.Containers, randContainer(r))
	}
	data, _ := proto.Marshal(list)
	buf := mem.BufferSlice{mem.SliceBuffer(data)}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := newCRICodec().Unmarshal(buf, &runtimeapi.ListContainersResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("standard", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := newCRICodec().std.Unmarshal(buf, &runtimeapi.ListContainersResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
