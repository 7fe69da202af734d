package nodestatus_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/nodestatustest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	host    *nodestatustest.Host
	rt      *nodestatustest.Runtime
	clock   *clocktesting.FakeClock
	rec     *record.FakeRecorder
	setters nodestatus.Setters
	node    *corev1.Node
}

func newFixture(t testing.TB, mod func(o *nodestatus.Options)) *fixture {
	t.Helper()
	f := &fixture{
		host:  nodestatustest.NewHost(nodestatustest.Facts("node-a")),
		rt:    nodestatustest.NewRuntime(),
		clock: clocktesting.NewFakeClock(t0),
		rec:   record.NewFakeRecorder(100),
		node:  &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
	}
	o := nodestatus.Options{Host: f.host, Runtime: f.rt, Clock: f.clock, Recorder: f.rec}
	if mod != nil {
		mod(&o)
	}
	s, err := nodestatus.DefaultSetters(o)
	if err != nil {
		t.Fatalf("DefaultSetters: %v", err)
	}
	f.setters = s
	return f
}

func (f *fixture) pass(t testing.TB) error {
	t.Helper()
	return f.setters.SetStatus(context.Background(), f.node)
}

func (f *fixture) mustPass(t testing.TB) {
	t.Helper()
	if err := f.pass(t); err != nil {
		t.Fatalf("pass: %v", err)
	}
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func cond(t testing.TB, node *corev1.Node, ct corev1.NodeConditionType) corev1.NodeCondition {
	t.Helper()
	for _, c := range node.Status.Conditions {
		if c.Type == ct {
			return c
		}
	}
	t.Fatalf("no %s condition in %v", ct, node.Status.Conditions)
	return corev1.NodeCondition{}
}

func qty(node *corev1.Node, alloc bool, name corev1.ResourceName) string {
	rl := node.Status.Capacity
	if alloc {
		rl = node.Status.Allocatable
	}
	q, ok := rl[name]
	if !ok {
		return "<none>"
	}
	return q.String()
}

func TestDefaultSettersOrder(t *testing.T) {
	f := newFixture(t, nil)
	var names []string
	for _, s := range f.setters {
		names = append(names, s.Name)
	}
	want := []string{"NodeAddress", "MachineInfo", "VersionInfo", "DaemonEndpoints", "Images", "GoRuntime",
		"RuntimeHandlers", "NodeFeatures", "MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "VolumesInUse"}
	if !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	f.mustPass(t)
	var types []corev1.NodeConditionType
	for _, c := range f.node.Status.Conditions {
		types = append(types, c.Type)
	}
	if want := []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}; !slices.Equal(types, want) {
		t.Fatalf("conditions %v, want %v", types, want)
	}
}

func TestOptionsBoundErrors(t *testing.T) {
	host := nodestatustest.NewHost(nodestatustest.Facts("n"))
	rt := nodestatustest.NewRuntime()
	negative := corev1.ResourceList{"memory": resource.MustParse("-1Mi")}
	for _, tc := range []struct {
		mod  func(o *nodestatus.Options)
		want string
	}{
		{func(o *nodestatus.Options) { o.MaxPods = -1 }, "nodestatus: Options.MaxPods -1 must be at least 1"},
		{func(o *nodestatus.Options) { o.PodsPerCore = -1 }, "nodestatus: Options.PodsPerCore -1 must be at least 0"},
		{func(o *nodestatus.Options) { o.MaxImages = -2 }, "nodestatus: Options.MaxImages -2 must be at least -1"},
		{func(o *nodestatus.Options) { o.MaxNamesPerImage = -1 }, "nodestatus: Options.MaxNamesPerImage -1 must be at least 1"},
		{func(o *nodestatus.Options) { o.KubeReserved = negative }, "nodestatus: Options.KubeReserved[memory] -1Mi must be at least 0"},
	} {
		o := nodestatus.Options{Host: host, Runtime: rt}
		tc.mod(&o)
		if _, err := nodestatus.DefaultSetters(o); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func TestOptionsErrorsNameTheField(t *testing.T) {
	host := nodestatustest.NewHost(nodestatustest.Facts("n"))
	rt := nodestatustest.NewRuntime()
	for _, tc := range []struct {
		field string
		mod   func(o *nodestatus.Options)
	}{
		{"Runtime", func(o *nodestatus.Options) { o.Runtime = nil }},
		{"MaxPods", func(o *nodestatus.Options) { o.MaxPods = -1 }},
		{"PodsPerCore", func(o *nodestatus.Options) { o.PodsPerCore = -1 }},
		{"PressureTransitionPeriod", func(o *nodestatus.Options) { o.PressureTransitionPeriod = 10 }},
		{"PressureTransitionPeriod", func(o *nodestatus.Options) { o.PressureTransitionPeriod = 2 * time.Hour }},
		{"RuntimeDownAfter", func(o *nodestatus.Options) { o.RuntimeDownAfter = time.Millisecond }},
		{"RuntimeDownAfter", func(o *nodestatus.Options) { o.RuntimeDownAfter = 2 * time.Hour }},
		{"KubeletPort", func(o *nodestatus.Options) { o.KubeletPort = 70000 }},
		{"MaxImages", func(o *nodestatus.Options) { o.MaxImages = -2 }},
		{"MaxNamesPerImage", func(o *nodestatus.Options) { o.MaxNamesPerImage = -1 }},
		{"EvictionHard", func(o *nodestatus.Options) { o.EvictionHard = map[string]string{"memory.available": "lots"} }},
		{"EvictionHard", func(o *nodestatus.Options) { o.EvictionHard = map[string]string{"nodefs.available": "120%"} }},
		{"EvictionHard", func(o *nodestatus.Options) { o.EvictionHard = map[string]string{"allocatableMemory.available": "1Gi"} }},
		{"HealthChecks", func(o *nodestatus.Options) { o.HealthChecks = []nodestatus.HealthCheck{{Name: "x"}} }},
		{"SystemReserved", func(o *nodestatus.Options) {
			o.SystemReserved = corev1.ResourceList{"cpu": resource.MustParse("-1")}
		}},
		{"NodeIPs", func(o *nodestatus.Options) { o.NodeIPs = []net.IP{net.ParseIP("127.0.0.1")} }},
		{"NodeIPs", func(o *nodestatus.Options) { o.NodeIPs = []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("10.0.0.2")} }},
		{"NodeIPs", func(o *nodestatus.Options) { o.NodeIPs = []net.IP{net.ParseIP("fe80::1")} }},
		{"ExternalIPs", func(o *nodestatus.Options) { o.ExternalIPs = []net.IP{net.IPv4zero} }},
	} {
		o := nodestatus.Options{Host: host, Runtime: rt}
		tc.mod(&o)
		_, err := nodestatus.DefaultSetters(o)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v does not name the field", tc.field, err)
		}
	}
}

func TestNodeAddress(t *testing.T) {
	v4, v6 := net.ParseIP("192.0.2.10"), net.ParseIP("2001:db8::10")
	for _, tc := range []struct {
		name    string
		mod     func(o *nodestatus.Options)
		facts   func(f *nodestatus.HostFacts)
		want    string
		wantErr string
	}{
		{name: "detected", want: "InternalIP=10.6.117.49 Hostname=node-a"},
		{name: "hostname override lower-cased", mod: func(o *nodestatus.Options) { o.Hostname = "Node-B.Example" },
			want: "InternalIP=10.6.117.49 Hostname=node-b.example"},
		{name: "hostname that is an IP", mod: func(o *nodestatus.Options) { o.Hostname = "192.0.2.99" },
			want: "InternalIP=192.0.2.99 Hostname=192.0.2.99"},
		{name: "one node IP", mod: func(o *nodestatus.Options) { o.NodeIPs = []net.IP{v4} },
			want: "InternalIP=192.0.2.10 Hostname=node-a"},
		{name: "dual-stack", mod: func(o *nodestatus.Options) { o.NodeIPs = []net.IP{v6, v4} },
			want: "InternalIP=2001:db8::10 InternalIP=192.0.2.10 Hostname=node-a"},
		{name: "external", mod: func(o *nodestatus.Options) {
			o.NodeIPs = []net.IP{v4}
			o.ExternalIPs = []net.IP{net.ParseIP("203.0.113.5")}
		}, want: "InternalIP=192.0.2.10 ExternalIP=203.0.113.5 Hostname=node-a"},
		{name: "prefer IPv6", mod: func(o *nodestatus.Options) { o.NodeIPs = []net.IP{net.IPv6unspecified} },
			facts: func(f *nodestatus.HostFacts) { f.IPs = []net.IP{v4, v6} },
			want:  "InternalIP=2001:db8::10 Hostname=node-a"},
		{name: "other family when preferred is absent", facts: func(f *nodestatus.HostFacts) { f.IPs = []net.IP{v6} },
			want: "InternalIP=2001:db8::10 Hostname=node-a"},
		{name: "hostname missing", facts: func(f *nodestatus.HostFacts) {
			f.Missing = []nodestatus.FactError{{Fact: nodestatus.FactHostname, Err: errors.New("uname failed")}}
		}, want: "InternalIP=10.6.117.49", wantErr: "host fact hostname: uname failed"},
		{name: "no address", facts: func(f *nodestatus.HostFacts) {
			f.IPs = nil
			f.Missing = []nodestatus.FactError{{Fact: nodestatus.FactAddresses, Err: errors.New("no default route")}}
		}, want: "", wantErr: "can't get ip address of node node-a: host fact addresses: no default route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mod)
			if tc.facts != nil {
				f.host.Update(tc.facts)
			}
			err := f.pass(t)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.wantErr != "" {
				var se *nodestatus.SetterError
				if !errors.As(err, &se) || se.Setter != "NodeAddress" || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one from NodeAddress with %q", err, tc.wantErr)
				}
			}
			var got []string
			for _, a := range f.node.Status.Addresses {
				got = append(got, string(a.Type)+"="+a.Address)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("addresses %v, want %s", got, tc.want)
			}
		})
	}
}

func TestMachineInfo(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		name  string
		mod   func(o *nodestatus.Options)
		facts func(f *nodestatus.HostFacts)
		want  map[string]string // "capacity/cpu" or "allocatable/memory" -> quantity
	}{
		{name: "defaults", want: map[string]string{
			"capacity/cpu": "4", "allocatable/cpu": "4",
			"capacity/memory": "16Gi", "allocatable/memory": "16284Mi", // less memory.available<100Mi
			"capacity/pods": "110", "allocatable/pods": "110",
			"capacity/ephemeral-storage": "107374182400", "allocatable/ephemeral-storage": "96636764160", // less 10%
		}},
		{name: "reserved", mod: func(o *nodestatus.Options) {
			o.SystemReserved = corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi"), "ephemeral-storage": resource.MustParse("10Gi")}
			o.KubeReserved = corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("512Mi")}
			o.EvictionHard = map[string]string{"memory.available": "5%"}
			o.MaxPods = 20
		}, want: map[string]string{
			"allocatable/cpu": "2500m", "allocatable/memory": "14710262989", // 16Gi-1.5Gi-5%
			"allocatable/ephemeral-storage": "96636764160" /* 90Gi */, "capacity/pods": "20",
		}},
		{name: "never negative", mod: func(o *nodestatus.Options) {
			o.SystemReserved = corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi")}
		}, want: map[string]string{"allocatable/cpu": "0", "allocatable/memory": "0"}},
		{name: "pods per core", mod: func(o *nodestatus.Options) { o.PodsPerCore = 10 },
			want: map[string]string{"capacity/pods": "40"}},
		{name: "huge pages", facts: func(f *nodestatus.HostFacts) {
			f.HugePages = []nodestatus.HugePages{{PageSize: 2 << 20, Pages: 512}, {PageSize: gi, Pages: 2}}
		}, want: map[string]string{
			"capacity/hugepages-2Mi": "1Gi", "allocatable/hugepages-2Mi": "1Gi",
			"capacity/hugepages-1Gi": "2Gi", "allocatable/memory": "13212Mi", // 16Gi-100Mi-3Gi
		}},
		{name: "memory missing", facts: func(f *nodestatus.HostFacts) {
			f.Missing = []nodestatus.FactError{{Fact: nodestatus.FactMemory, Err: errors.New("no meminfo")}}
		}, want: map[string]string{"capacity/memory": "<none>", "allocatable/memory": "<none>", "capacity/cpu": "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mod)
			if tc.facts != nil {
				f.host.Update(tc.facts)
			}
			_ = f.pass(t)
			for k, want := range tc.want {
				kind, name, _ := strings.Cut(k, "/")
				if got := qty(f.node, kind == "allocatable", corev1.ResourceName(name)); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
		})
	}

	t.Run("ids, stale huge pages, foreign resources, reboot", func(t *testing.T) {
		f := newFixture(t, nil)
		f.node.Status.Capacity = corev1.ResourceList{"hugepages-1Gi": resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("2")}
		f.node.Status.Allocatable = corev1.ResourceList{"hugepages-1Gi": resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("1")}
		f.mustPass(t)
		facts := nodestatustest.Facts("node-a")
		info := f.node.Status.NodeInfo
		if info.MachineID != facts.MachineID || info.SystemUUID != facts.SystemUUID || info.BootID != facts.BootID {
			t.Fatalf("node info %+v, want ids of %+v", info, facts)
		}
		if got := qty(f.node, false, "hugepages-1Gi"); got != "<none>" {
			t.Errorf("stale hugepages-1Gi kept: %s", got)
		}
		if qty(f.node, false, "example.com/gpu") != "2" || qty(f.node, true, "example.com/gpu") != "1" {
			t.Errorf("foreign resource touched: %v / %v", f.node.Status.Capacity, f.node.Status.Allocatable)
		}
		f.events()
		f.host.Update(func(h *nodestatus.HostFacts) { h.BootID = "new-boot" })
		f.mustPass(t)
		f.host.Update(func(h *nodestatus.HostFacts) { h.BootID = "newer-boot" })
		f.mustPass(t)
		ev := f.events()
		if len(ev) != 1 || ev[0] != "Warning Rebooted Node node-a has been rebooted, boot id: new-boot" {
			t.Fatalf("events %q, want one reboot event", ev)
		}
	})

	t.Run("missing fact makes node not ready and names the setter", func(t *testing.T) {
		f := newFixture(t, nil)
		f.host.SetMissing(nodestatus.FactMemory, errors.New("open /proc/meminfo: no such file"))
		f.host.SetMissing(nodestatus.FactNodeFS, errors.New("statfs: permission denied"))
		err := f.pass(t)
		var se *nodestatus.SetterError
		var fe nodestatus.FactError
		if !errors.As(err, &se) || se.Setter != "MachineInfo" || !errors.As(err, &fe) || fe.Fact != nodestatus.FactMemory {
			t.Fatalf("error %v, want MachineInfo's memory fact error first", err)
		}
		if !strings.Contains(err.Error(), "setter MachineInfo: host fact memory: open /proc/meminfo: no such file") ||
			!strings.Contains(err.Error(), "setter DiskPressure: host fact nodefs: statfs: permission denied") {
			t.Fatalf("error %q", err)
		}
		r := cond(t, f.node, corev1.NodeReady)
		if r.Status != corev1.ConditionFalse || r.Reason != "KubeletNotReady" ||
			r.Message != "missing node capacity for resources: memory, ephemeral-storage" {
			t.Fatalf("ready %+v", r)
		}
	})
}

// The runtime's version is read as kubelet reads it: semantic, else generic.
func TestRuntimeVersionNormalized(t *testing.T) {
	for in, want := range map[string]string{
		"v1.7.24":        "containerd://1.7.24",
		"1.6.20~ds1":     "containerd://1.6.20",
		"1.7.0-rc.1":     "containerd://1.7.0-rc.1",
		"2.0.0+unknown":  "containerd://2.0.0+unknown",
		"not-a-version":  "containerd://not-a-version",
		"1.6.20-1+deb12": "containerd://1.6.20-1+deb12",
	} {
		f := newFixture(t, nil)
		f.rt.SetVersion("containerd", in)
		f.mustPass(t)
		if got := f.node.Status.NodeInfo.ContainerRuntimeVersion; got != want {
			t.Errorf("runtime version %q: containerRuntimeVersion %q, want %q", in, got, want)
		}
	}
}

func TestVersionInfoAndFixedFields(t *testing.T) {
	f := newFixture(t, func(o *nodestatus.Options) { o.KubeletPort = 10255; o.KubeletVersion = "v1.37.0-edge" })
	f.rt.SetVersion("containerd", "v2.1.4")
	f.node.Status.NodeInfo.KubeProxyVersion = "v1.30.0"
	f.mustPass(t)
	info := f.node.Status.NodeInfo
	if info.KernelVersion != "6.12.0-nodekit" || info.OSImage != "nodekit simulated Linux" ||
		info.ContainerRuntimeVersion != "containerd://2.1.4" || info.KubeletVersion != "v1.37.0-edge" ||
		info.KubeProxyVersion != "" || info.OperatingSystem == "" || info.Architecture == "" {
		t.Fatalf("node info %+v", info)
	}
	if p := f.node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 10255 {
		t.Fatalf("kubelet port %d", p)
	}

	f.rt.SetErrors(errors.New("connection refused"), nil, nil)
	f.host.SetMissing(nodestatus.FactKernelVersion, nil)
	err := f.pass(t)
	if got := f.node.Status.NodeInfo.ContainerRuntimeVersion; got != "containerd://Unknown" {
		t.Fatalf("runtime version %q after failure", got)
	}
	if err == nil || !strings.Contains(err.Error(), "setter VersionInfo: host fact kernelVersion: not known") ||
		!strings.Contains(err.Error(), "container runtime version: connection refused") {
		t.Fatalf("error %v", err)
	}
	if f.node.Status.NodeInfo.KernelVersion != "6.12.0-nodekit" {
		t.Fatal("kernel version lost when the fact went missing")
	}

	f2 := newFixture(t, nil)
	f2.rt.SetErrors(errors.New("down"), nil, nil)
	_ = f2.pass(t)
	if got := f2.node.Status.NodeInfo.ContainerRuntimeVersion; got != "unknown://Unknown" {
		t.Fatalf("runtime version %q of a runtime never seen", got)
	}
}

func TestImages(t *testing.T) {
	img := func(id string, size uint64, digests, tags int) *runtimeapi.Image {
		im := &runtimeapi.Image{Id: id, Size: size}
		for i := range digests {
			im.RepoDigests = append(im.RepoDigests, id+"@d"+string(rune('0'+i)))
		}
		for i := range tags {
			im.RepoTags = append(im.RepoTags, id+":t"+string(rune('0'+i)))
		}
		return im
	}
	for _, tc := range []struct {
		name   string
		mod    func(o *nodestatus.Options)
		images []*runtimeapi.Image
		want   []string // "size:names"
	}{
		{name: "none", want: nil},
		{name: "largest first, ties by ID descending", images: []*runtimeapi.Image{
			img("a", 10, 0, 1), img("b", 30, 0, 1), img("c", 10, 0, 1), img("d", 20, 0, 0),
		}, want: []string{"30:b:t0", "20:", "10:c:t0", "10:a:t0"}},
		{name: "five names, digests first", images: []*runtimeapi.Image{img("x", 1, 3, 4)},
			want: []string{"1:x@d0,x@d1,x@d2,x:t0,x:t1"}},
		{name: "max names", mod: func(o *nodestatus.Options) { o.MaxNamesPerImage = 2 },
			images: []*runtimeapi.Image{img("x", 1, 3, 4)}, want: []string{"1:x@d0,x@d1"}},
		{name: "max images", mod: func(o *nodestatus.Options) { o.MaxImages = 2 },
			images: []*runtimeapi.Image{img("a", 1, 0, 1), img("b", 3, 0, 1), img("c", 2, 0, 1)},
			want:   []string{"3:b:t0", "2:c:t0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mod)
			f.rt.SetImages(tc.images)
			f.mustPass(t)
			var got []string
			for _, im := range f.node.Status.Images {
				got = append(got, strings.TrimSuffix(
					resource.NewQuantity(im.SizeBytes, resource.DecimalSI).String()+":"+strings.Join(im.Names, ","), ""))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("images %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("50 at most by default, and an error keeps the last list", func(t *testing.T) {
		f := newFixture(t, nil)
		f.rt.SetImages(nodestatustest.Images(80))
		f.mustPass(t)
		if n := len(f.node.Status.Images); n != 50 || f.node.Status.Images[0].SizeBytes != 80<<20 {
			t.Fatalf("%d images, first %d bytes", n, f.node.Status.Images[0].SizeBytes)
		}
		f.rt.SetErrors(nil, nil, errors.New("image service down"))
		err := f.pass(t)
		if err == nil || !strings.Contains(err.Error(), "setter Images: listing images (keeping the last list): image service down") {
			t.Fatalf("error %v", err)
		}
		if n := len(f.node.Status.Images); n != 50 || f.node.Status.Images[0].SizeBytes != 80<<20 {
			t.Fatalf("after a failed listing: %d images, want the last 50", n)
		}
	})
}

func TestRuntimeHandlersAndFeatures(t *testing.T) {
	f := newFixture(t, nil)
	f.mustPass(t)
	if f.node.Status.RuntimeHandlers != nil || f.node.Status.Features != nil {
		t.Fatalf("handlers %v features %v from a runtime that reports none", f.node.Status.RuntimeHandlers, f.node.Status.Features)
	}
	f.rt.SetHandlers(
		&runtimeapi.RuntimeHandler{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
		&runtimeapi.RuntimeHandler{Name: ""},
	)
	f.rt.SetFeatures(&runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true})
	f.mustPass(t)
	hs := f.node.Status.RuntimeHandlers
	if len(hs) != 2 || hs[0].Name != "" || *hs[0].Features.RecursiveReadOnlyMounts || hs[1].Name != "runc" ||
		!*hs[1].Features.RecursiveReadOnlyMounts || !*hs[1].Features.UserNamespaces {
		t.Fatalf("handlers %+v", hs)
	}
	if f.node.Status.Features == nil || !*f.node.Status.Features.SupplementalGroupsPolicy {
		t.Fatalf("features %+v", f.node.Status.Features)
	}
	// A runtime that is not ready: the last handlers and features stay.
	f.rt.SetHandlers()
	f.rt.SetFeatures(nil)
	f.rt.SetRuntimeReady(false, "Broken", "it broke")
	f.mustPass(t)
	if len(f.node.Status.RuntimeHandlers) != 2 || f.node.Status.Features == nil {
		t.Fatal("handlers or features dropped while the runtime was not ready")
	}
}

func TestPressureConditions(t *testing.T) {
	const gi = 1 << 30
	for _, tc := range []struct {
		cond               corev1.NodeConditionType
		pressure, relief   func(f *nodestatus.HostFacts)
		trueReason, reason string
		trueMsg, msg       string
		fact               nodestatus.Fact
	}{
		{corev1.NodeMemoryPressure,
			func(f *nodestatus.HostFacts) { f.MemoryAvailable = 99 << 20 },
			func(f *nodestatus.HostFacts) { f.MemoryAvailable = 8 * gi },
			"KubeletHasInsufficientMemory", "KubeletHasSufficientMemory",
			"kubelet has insufficient memory available", "kubelet has sufficient memory available", nodestatus.FactMemory},
		{corev1.NodeDiskPressure,
			func(f *nodestatus.HostFacts) { f.ImageFS.Available = 14 * gi }, // imagefs.available<15%
			func(f *nodestatus.HostFacts) { f.ImageFS.Available = 50 * gi },
			"KubeletHasDiskPressure", "KubeletHasNoDiskPressure",
			"kubelet has disk pressure", "kubelet has no disk pressure", nodestatus.FactImageFS},
		{corev1.NodeDiskPressure,
			func(f *nodestatus.HostFacts) { f.NodeFS.InodesFree = 1000 }, // nodefs.inodesFree<5%
			func(f *nodestatus.HostFacts) { f.NodeFS.InodesFree = 6_000_000 },
			"KubeletHasDiskPressure", "KubeletHasNoDiskPressure",
			"kubelet has disk pressure", "kubelet has no disk pressure", nodestatus.FactNodeFS},
		{corev1.NodePIDPressure,
			func(f *nodestatus.HostFacts) { f.PIDsInUse = f.PIDMax - 10 }, // pid.available<1000 below
			func(f *nodestatus.HostFacts) { f.PIDsInUse = 100 },
			"KubeletHasInsufficientPID", "KubeletHasSufficientPID",
			"kubelet has insufficient PID available", "kubelet has sufficient PID available", nodestatus.FactPIDs},
	} {
		t.Run(string(tc.cond)+"/"+string(tc.fact), func(t *testing.T) {
			f := newFixture(t, func(o *nodestatus.Options) {
				o.EvictionHard = nodestatus.DefaultEvictionHard()
				o.EvictionHard["pid.available"] = "1000"
			})
			check := func(status corev1.ConditionStatus, reason, msg string, transition, heartbeat time.Time) {
				t.Helper()
				c := cond(t, f.node, tc.cond)
				if c.Status != status || c.Reason != reason || c.Message != msg ||
					!c.LastTransitionTime.Time.Equal(transition) || !c.LastHeartbeatTime.Time.Equal(heartbeat) {
					t.Fatalf("condition %+v, want %s %s %q transition %v heartbeat %v", c, status, reason, msg, transition, heartbeat)
				}
			}
			f.mustPass(t)
			check(corev1.ConditionFalse, tc.reason, tc.msg, t0, t0)

			f.clock.Step(10 * time.Second)
			t1 := f.clock.Now()
			f.host.Update(tc.pressure)
			f.mustPass(t)
			check(corev1.ConditionTrue, tc.trueReason, tc.trueMsg, t1, t1)

			// Relief, but within the transition period: still True.
			f.host.Update(tc.relief)
			f.clock.Step(4*time.Minute + 59*time.Second)
			f.mustPass(t)
			check(corev1.ConditionTrue, tc.trueReason, tc.trueMsg, t1, f.clock.Now())

			// Five minutes after pressure was last seen: False.
			f.clock.Step(time.Second)
			t2 := f.clock.Now()
			f.mustPass(t)
			check(corev1.ConditionFalse, tc.reason, tc.msg, t2, t2)

			// Pressure seen again restarts the period.
			f.host.Update(tc.pressure)
			f.clock.Step(time.Minute)
			t3 := f.clock.Now()
			f.mustPass(t)
			f.host.Update(tc.relief)
			f.clock.Step(4 * time.Minute)
			f.mustPass(t)
			check(corev1.ConditionTrue, tc.trueReason, tc.trueMsg, t3, f.clock.Now())

			// A missing fact: the setter names it and the condition is still written.
			f.host.SetMissing(tc.fact, errors.New("gone"))
			f.clock.Step(2 * time.Minute)
			err := f.pass(t)
			if err == nil || !strings.Contains(err.Error(), "host fact "+string(tc.fact)+": gone") {
				t.Fatalf("error %v", err)
			}
			check(corev1.ConditionFalse, tc.reason, tc.msg, f.clock.Now(), f.clock.Now())
		})
	}

	t.Run("events", func(t *testing.T) {
		f := newFixture(t, nil)
		f.mustPass(t)
		f.events()
		f.host.Update(func(h *nodestatus.HostFacts) { h.MemoryAvailable = 1 })
		f.mustPass(t)
		f.mustPass(t)
		if ev := f.events(); !slices.Equal(ev, []string{"Normal NodeHasInsufficientMemory Node node-a status is now: NodeHasInsufficientMemory"}) {
			t.Fatalf("events %q", ev)
		}
	})
}

func TestReady(t *testing.T) {
	healthy := atomic.Pointer[error]{}
	for _, tc := range []struct {
		name    string
		setup   func(f *fixture)
		status  corev1.ConditionStatus
		message string
	}{
		{name: "ready", status: corev1.ConditionTrue, message: "kubelet is posting ready status"},
		{name: "runtime not ready", setup: func(f *fixture) { f.rt.SetRuntimeReady(false, "ContainerdDown", "containerd is down") },
			status: corev1.ConditionFalse, message: "container runtime not ready: RuntimeReady=false reason:ContainerdDown message:containerd is down"},
		{name: "network not ready", setup: func(f *fixture) {
			f.rt.SetNetworkReady(false, "NetworkPluginNotReady", "Network plugin returns error: cni plugin not initialized")
		}, status: corev1.ConditionFalse,
			message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"},
		{name: "health check", setup: func(f *fixture) {
			err := errors.New("pleg was last seen active 3m0s ago")
			healthy.Store(&err)
		}, status: corev1.ConditionFalse, message: "PLEG is not healthy: pleg was last seen active 3m0s ago"},
		{name: "several", setup: func(f *fixture) {
			f.rt.SetRuntimeReady(false, "R", "r")
			f.rt.SetNetworkReady(false, "N", "n")
			f.host.SetMissing(nodestatus.FactCPU, nil)
		}, status: corev1.ConditionFalse,
			message: "[container runtime not ready: RuntimeReady=false reason:R message:r, container runtime network not ready: NetworkReady=false reason:N message:n, missing node capacity for resources: cpu]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			healthy.Store(nil)
			f := newFixture(t, func(o *nodestatus.Options) {
				o.HealthChecks = []nodestatus.HealthCheck{{Name: "PLEG", Check: func(context.Context) error {
					if p := healthy.Load(); p != nil {
						return *p
					}
					return nil
				}}}
			})
			f.mustPass(t) // a good runtime status check
			if tc.setup != nil {
				tc.setup(f)
			}
			f.clock.Step(10 * time.Second)
			_ = f.pass(t)
			c := cond(t, f.node, corev1.NodeReady)
			reason := "KubeletReady"
			if tc.status == corev1.ConditionFalse {
				reason = "KubeletNotReady"
			}
			if c.Status != tc.status || c.Reason != reason || c.Message != tc.message {
				t.Fatalf("ready %s %s %q, want %s %s %q", c.Status, c.Reason, c.Message, tc.status, reason, tc.message)
			}
			if last := f.node.Status.Conditions[len(f.node.Status.Conditions)-1]; last.Type != corev1.NodeReady {
				t.Fatalf("Ready is not the last condition: %v", f.node.Status.Conditions)
			}
		})
	}

	// kubelet's runtime state: "may not have completed yet" before the first
	// good check; a failed check keeps the last answer; "is down" only when
	// no check was good for 30s.
	t.Run("runtime down only after 30s without a good check", func(t *testing.T) {
		f := newFixture(t, nil)
		f.rt.SetErrors(nil, errors.New("connection refused"), nil)
		err := f.pass(t)
		if err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("pass error %v, want the status check's", err)
		}
		if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionFalse ||
			c.Message != "container runtime status check may not have completed yet" {
			t.Fatalf("ready before any good check: %s %q", c.Status, c.Message)
		}
		f.rt.SetErrors(nil, nil, nil)
		f.clock.Step(time.Second)
		f.mustPass(t)
		if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			t.Fatalf("ready after a good check: %s %q", c.Status, c.Message)
		}
		good := f.clock.Now()
		f.rt.SetErrors(nil, errors.New("connection refused"), nil)
		for _, step := range []time.Duration{10 * time.Second, 19 * time.Second} {
			f.clock.Step(step)
			_ = f.pass(t)
			if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionTrue {
				t.Fatalf("ready %v after the last good check: %s %q, want still True", f.clock.Since(good), c.Status, c.Message)
			}
		}
		f.clock.Step(time.Second) // 30s
		_ = f.pass(t)
		if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionFalse || c.Message != "container runtime is down" {
			t.Fatalf("ready 30s after the last good check: %s %q, want False \"container runtime is down\"", c.Status, c.Message)
		}
		f.rt.SetErrors(nil, nil, nil)
		f.clock.Step(time.Second)
		f.mustPass(t)
		if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			t.Fatalf("ready once the runtime answers again: %s %q", c.Status, c.Message)
		}
	})
	t.Run("runtime down after Options.RuntimeDownAfter", func(t *testing.T) {
		f := newFixture(t, func(o *nodestatus.Options) { o.RuntimeDownAfter = 5 * time.Second })
		f.mustPass(t)
		f.rt.SetErrors(nil, errors.New("connection refused"), nil)
		f.clock.Step(4 * time.Second)
		_ = f.pass(t)
		if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionTrue {
			t.Fatalf("ready 4s after the last good check: %s %q, want still True", c.Status, c.Message)
		}
		f.clock.Step(time.Second)
		_ = f.pass(t)
		if c := cond(t, f.node, corev1.NodeReady); c.Status != corev1.ConditionFalse || c.Message != "container runtime is down" {
			t.Fatalf("ready 5s after the last good check: %s %q, want False \"container runtime is down\"", c.Status, c.Message)
		}
	})

	t.Run("transition times and events", func(t *testing.T) {
		f := newFixture(t, nil)
		f.mustPass(t)
		f.clock.Step(10 * time.Second)
		f.mustPass(t)
		c := cond(t, f.node, corev1.NodeReady)
		if !c.LastTransitionTime.Time.Equal(t0) || !c.LastHeartbeatTime.Time.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("ready times %+v", c)
		}
		f.events()
		f.rt.SetNetworkReady(false, "NoCNI", "no cni")
		f.clock.Step(10 * time.Second)
		t1 := f.clock.Now()
		f.mustPass(t)
		f.clock.Step(10 * time.Second)
		f.mustPass(t)
		c = cond(t, f.node, corev1.NodeReady)
		if c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(t1) || !c.LastHeartbeatTime.Time.Equal(f.clock.Now()) {
			t.Fatalf("ready %+v", c)
		}
		f.rt.SetNetworkReady(true, "", "")
		f.mustPass(t)
		if ev := f.events(); !slices.Equal(ev, []string{"Normal NodeNotReady Node node-a status is now: NodeNotReady", "Normal NodeReady Node node-a status is now: NodeReady"}) {
			t.Fatalf("events %q", ev)
		}
	})
}

func TestForeignConditionsAndFieldsSurvive(t *testing.T) {
	f := newFixture(t, nil)
	old := metav1.NewTime(t0.Add(-time.Hour))
	npd := corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: "KernelHasNoDeadlock",
		Message: "kernel has no deadlock", LastHeartbeatTime: old, LastTransitionTime: old}
	f.node.Status.Conditions = []corev1.NodeCondition{npd}
	f.node.Status.Capacity = corev1.ResourceList{"example.com/fpga": resource.MustParse("3")}
	f.node.Status.Config = &corev1.NodeConfigStatus{Error: "kept"}
	f.mustPass(t)
	f.clock.Step(time.Minute)
	f.mustPass(t)
	if got := f.node.Status.Conditions[0]; got != npd {
		t.Fatalf("foreign condition changed: %+v", got)
	}
	if len(f.node.Status.Conditions) != 5 {
		t.Fatalf("conditions %v", f.node.Status.Conditions)
	}
	if qty(f.node, false, "example.com/fpga") != "3" || f.node.Status.Config.Error != "kept" {
		t.Fatal("foreign status fields changed")
	}
}

func TestSetCondition(t *testing.T) {
	node := &corev1.Node{}
	now := metav1.NewTime(t0)
	if nodestatus.SetCondition(node, corev1.NodeCondition{Type: "X", Status: corev1.ConditionTrue, Reason: "A"}, now) {
		t.Fatal("a new condition is not a change of status")
	}
	later := metav1.NewTime(t0.Add(time.Minute))
	if nodestatus.SetCondition(node, corev1.NodeCondition{Type: "X", Status: corev1.ConditionTrue, Reason: "B", Message: "m"}, later) {
		t.Fatal("same status reported as a change")
	}
	c := node.Status.Conditions[0]
	if c.Reason != "B" || c.Message != "m" || !c.LastTransitionTime.Equal(&now) || !c.LastHeartbeatTime.Equal(&later) {
		t.Fatalf("condition %+v", c)
	}
	if !nodestatus.SetCondition(node, corev1.NodeCondition{Type: "X", Status: corev1.ConditionFalse}, later) {
		t.Fatal("status change not reported")
	}
	if c := node.Status.Conditions[0]; !c.LastTransitionTime.Equal(&later) || len(node.Status.Conditions) != 1 {
		t.Fatalf("conditions %+v", node.Status.Conditions)
	}
}

// counting wraps the fakes to count calls.
type countingHost struct {
	nodestatus.Host
	n atomic.Int32
}

func (c *countingHost) Facts(ctx context.Context) (*nodestatus.HostFacts, error) {
	c.n.Add(1)
	return c.Host.Facts(ctx)
}

type countingRuntime struct {
	nodestatus.RuntimeInfo
	version, status, images atomic.Int32
}

func (c *countingRuntime) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	c.version.Add(1)
	return c.RuntimeInfo.Version(ctx)
}

func (c *countingRuntime) Status(ctx context.Context, v bool) (*runtimeapi.StatusResponse, error) {
	c.status.Add(1)
	return c.RuntimeInfo.Status(ctx, v)
}

func (c *countingRuntime) ListImages(ctx context.Context, f *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	c.images.Add(1)
	return c.RuntimeInfo.ListImages(ctx, f)
}

func TestOnePassAsksEachSourceOnce(t *testing.T) {
	host := &countingHost{Host: nodestatustest.NewHost(nodestatustest.Facts("n"))}
	rt := &countingRuntime{RuntimeInfo: nodestatustest.NewRuntime()}
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{Host: host, Runtime: rt, Clock: clocktesting.NewFakePassiveClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	for range 3 {
		if err := setters.SetStatus(context.Background(), node); err != nil {
			t.Fatal(err)
		}
	}
	if host.n.Load() != 3 || rt.version.Load() != 3 || rt.status.Load() != 3 || rt.images.Load() != 3 {
		t.Fatalf("3 passes asked host %d, version %d, status %d, images %d times", host.n.Load(), rt.version.Load(), rt.status.Load(), rt.images.Load())
	}
	// A setter run on its own asks afresh each time.
	ready := setters[setters.Index(nodestatus.SetterReady)]
	_ = ready.SetStatus(context.Background(), node)
	_ = ready.SetStatus(context.Background(), node)
	if rt.status.Load() != 5 {
		t.Fatalf("status asked %d times", rt.status.Load())
	}
}

func TestVolumesInUse(t *testing.T) {
	f := newFixture(t, nil)
	f.node.Status.VolumesInUse = []corev1.UniqueVolumeName{"kept"}
	f.mustPass(t)
	if !slices.Equal(f.node.Status.VolumesInUse, []corev1.UniqueVolumeName{"kept"}) {
		t.Fatal("volumesInUse changed without a source")
	}
	f = newFixture(t, func(o *nodestatus.Options) {
		o.VolumesInUse = func() []corev1.UniqueVolumeName { return []corev1.UniqueVolumeName{"kubernetes.io/csi/x^y"} }
	})
	f.mustPass(t)
	if len(f.node.Status.VolumesInUse) != 1 {
		t.Fatal("volumesInUse not set")
	}
}

func TestHostTotalFailure(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the fake host then fails as a whole
	err := f.setters.SetStatus(ctx, f.node)
	if err == nil {
		t.Fatal("no error")
	}
	var se *nodestatus.SetterError
	if !errors.As(err, &se) || se.Setter != "NodeAddress" || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	r := cond(t, f.node, corev1.NodeReady)
	if r.Status != corev1.ConditionFalse {
		t.Fatalf("ready %+v", r)
	}
}

// Facts and runtime answers change while passes run: no data race.
func TestConcurrentChanges(t *testing.T) {
	f := newFixture(t, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			f.host.Update(func(h *nodestatus.HostFacts) { h.MemoryAvailable = uint64(i) << 20 })
			f.rt.SetImages(nodestatustest.Images(i % 60))
			f.rt.SetNetworkReady(i%2 == 0, "", "")
		}
	}()
	for range 200 {
		_ = f.pass(t)
	}
	<-done
}

// With Options.RuntimeStatus the setters read the runtime's status from
// the source and never ask the runtime; Ready dates the runtime's last good
// answer by the observation's time, so a source that stops observing makes
// the node NotReady 30s after its last good observation.
func TestReadyFromRuntimeStatusSource(t *testing.T) {
	var (
		mu       atomic.Pointer[runtimeapi.StatusResponse]
		observed atomic.Pointer[time.Time]
		srcErr   atomic.Pointer[error]
	)
	status := func(runtimeReady, networkReady bool) *runtimeapi.StatusResponse {
		return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: runtimeReady},
			{Type: runtimeapi.NetworkReady, Status: networkReady, Reason: "NetworkPluginNotReady", Message: "cni plugin not initialized"},
		}}}
	}
	source := nodestatus.RuntimeStatusFunc(func() (*runtimeapi.StatusResponse, time.Time, error) {
		if p := srcErr.Load(); p != nil {
			return nil, time.Time{}, *p
		}
		at := observed.Load()
		if at == nil {
			return nil, time.Time{}, nil
		}
		return mu.Load(), *at, nil
	})
	f := newFixture(t, func(o *nodestatus.Options) { o.RuntimeStatus = source })
	// The runtime itself fails every Status call: it must not be asked.
	f.rt.SetErrors(nil, errors.New("runtime asked"), nil)
	ready := func() corev1.NodeCondition { return cond(t, f.node, corev1.NodeReady) }
	observe := func(st *runtimeapi.StatusResponse) {
		now := f.clock.Now()
		mu.Store(st)
		observed.Store(&now)
	}

	if err := f.pass(t); err == nil || !strings.Contains(err.Error(), "has not been observed yet") {
		t.Fatalf("pass before any observation: %v", err)
	}
	if c := ready(); c.Status != corev1.ConditionFalse || c.Message != "container runtime status check may not have completed yet" {
		t.Fatalf("ready before any observation: %s %q", c.Status, c.Message)
	}

	observe(status(true, true))
	f.mustPass(t)
	if c := ready(); c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Fatalf("ready after a good observation: %s %q", c.Status, c.Message)
	}

	f.clock.Step(time.Second)
	observe(status(true, false))
	f.mustPass(t)
	if c := ready(); c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" ||
		c.Message != "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized" {
		t.Fatalf("ready with the network not ready: %s %s %q", c.Status, c.Reason, c.Message)
	}

	// The source stops observing: still Ready for 30s after its last good
	// observation, then the runtime is down.
	observe(status(true, true))
	last := f.clock.Now()
	f.clock.Step(29 * time.Second)
	f.mustPass(t)
	if c := ready(); c.Status != corev1.ConditionTrue {
		t.Fatalf("ready %v after the last observation: %s %q", f.clock.Since(last), c.Status, c.Message)
	}
	f.clock.Step(time.Second)
	f.mustPass(t)
	if c := ready(); c.Status != corev1.ConditionFalse || c.Message != "container runtime is down" {
		t.Fatalf("ready 30s after the last observation: %s %q", c.Status, c.Message)
	}

	// The source's own error is the pass's; what the last answer said holds.
	observe(status(true, true))
	f.mustPass(t)
	e := errors.New("relist failed")
	srcErr.Store(&e)
	f.clock.Step(time.Second)
	if err := f.pass(t); err == nil || !strings.Contains(err.Error(), "relist failed") {
		t.Fatalf("pass with a failing source: %v", err)
	}
	if c := ready(); c.Status != corev1.ConditionTrue {
		t.Fatalf("ready after one failed observation: %s %q", c.Status, c.Message)
	}
}
