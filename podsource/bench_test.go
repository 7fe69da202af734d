package podsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

const benchPods = 1000

func benchManifest(i, version int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: static-%04d
  labels:
    app: static-%04d
    tier: node
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: app
    image: registry.example/app:%d
    command: ["/bin/app", "--port=%d"]
    ports:
    - containerPort: %d
    resources:
      requests:
        cpu: 10m
        memory: 16Mi
    livenessProbe:
      httpGet:
        path: /healthz
        port: %d
  - name: sidecar
    image: registry.example/sidecar:1.0
    volumeMounts:
    - name: data
      mountPath: /data
  volumes:
  - name: data
    hostPath:
      path: /var/lib/static-%04d
`, i, i, version, 10000+i, 10000+i, 10000+i, i)
}

func benchDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for i := 0; i < benchPods; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("static-%04d.yaml", i)), []byte(benchManifest(i, 1)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// peakHeap samples the heap's live-and-unswept object bytes every
// millisecond until stopped, and returns the highest value seen.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	done := make(chan struct{})
	result := make(chan uint64)
	go func() {
		peak := read()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				if v := read(); v > peak {
					peak = v
				}
				result <- peak
				return
			case <-t.C:
				if v := read(); v > peak {
					peak = v
				}
			}
		}
	}()
	return func() uint64 { close(done); return <-result }
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkFileSource1000ToFirstSet: a directory of 1,000 static pod
// manifests, from constructing the source and merger to the merged ADD of
// all 1,000 pods.
func BenchmarkFileSource1000ToFirstSet(b *testing.B) {
	dir := benchDir(b)
	var peak, live uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		base := heapAfterGC()
		b.StartTimer()
		stop := peakHeap()
		ctx, cancel := context.WithCancel(context.Background())
		src, err := NewFile(FileOptions{Path: dir, NodeName: "bench-node"})
		if err != nil {
			b.Fatal(err)
		}
		m, err := NewMerger(MergerOptions{Sources: []PodSource{src}})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		u := <-m.Updates()
		if u.Op != OpAdd || len(u.Pods) != benchPods {
			b.Fatalf("first update %v with %d pods", u.Op, len(u.Pods))
		}
		b.StopTimer()
		if p := stop(); p > base && p-base > peak {
			peak = p - base
		}
		if l := heapAfterGC(); l > base && l-base > live {
			live = l - base
		}
		runtime.KeepAlive(u)
		cancel()
		<-done
	}
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(live)/1e6, "live-heap-MB")
}

// BenchmarkFileSource1000OneChange: among 1,000 watched manifests, one file
// is replaced (renamed into place) with new content; measured until the
// merged ADD of its new pod (after the REMOVE of the old one).
func BenchmarkFileSource1000OneChange(b *testing.B) {
	dir := benchDir(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := NewFile(FileOptions{Path: dir, NodeName: "bench-node"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewMerger(MergerOptions{Sources: []PodSource{src}})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if u := <-m.Updates(); len(u.Pods) != benchPods {
		b.Fatalf("first update has %d pods", len(u.Pods))
	}
	base := heapAfterGC()
	stop := peakHeap()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := i % benchPods
		path := filepath.Join(dir, fmt.Sprintf("static-%04d.yaml", n))
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(benchManifest(n, i+2)), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
		if u := <-m.Updates(); u.Op != OpRemove || len(u.Pods) != 1 {
			b.Fatalf("update %s", describe(u))
		}
		if u := <-m.Updates(); u.Op != OpAdd || len(u.Pods) != 1 {
			b.Fatalf("update %s", describe(u))
		}
	}
	b.StopTimer()
	peak := stop()
	b.ReportMetric(float64(peak-min(base, peak))/1e6, "peak-heap-MB")
}
