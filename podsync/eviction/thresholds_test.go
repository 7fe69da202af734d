package eviction_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/eviction"
)

func TestParseThresholds(t *testing.T) {
	type in struct{ hard, soft, grace, reclaim map[string]string }
	tests := []struct {
		name    string
		in      in
		want    []string // Threshold.String() [+ " grace" + GracePeriod] [+ " min" + MinReclaim]
		wantErr string
	}{
		{name: "kubelet defaults", in: in{hard: nodestatus.DefaultEvictionHard()},
			want: []string{"imagefs.available<15%", "imagefs.inodesFree<5%", "memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%"}},
		{name: "0% and 100% are ignored", in: in{hard: map[string]string{"nodefs.available": "0%", "imagefs.available": "100%", "pid.available": "1k"}},
			want: []string{"pid.available<1k"}},
		{name: "soft with grace and minimum reclaim on both",
			in: in{hard: map[string]string{"memory.available": "100Mi"}, soft: map[string]string{"memory.available": "1.5Gi"},
				grace: map[string]string{"memory.available": "1m30s"}, reclaim: map[string]string{"memory.available": "500Mi"}},
			want: []string{"memory.available<100Mi min500Mi", "memory.available<1536Mi grace1m30s min500Mi"}},
		{name: "allocatable signal by name", in: in{hard: map[string]string{"allocatableMemory.available": "5%"}},
			want: []string{"allocatableMemory.available<5%"}},
		{name: "unknown signal", in: in{hard: map[string]string{"memory.free": "1Gi"}},
			wantErr: `evictionHard["memory.free"]: unsupported eviction signal`},
		{name: "soft without grace period", in: in{soft: map[string]string{"nodefs.available": "20%"}},
			wantErr: `evictionSoft["nodefs.available"]: grace period must be specified`},
		{name: "negative quantity", in: in{hard: map[string]string{"memory.available": "-100Mi"}},
			wantErr: `evictionHard["memory.available"]: threshold must be positive: -100Mi`},
		{name: "zero quantity", in: in{hard: map[string]string{"memory.available": "0"}},
			wantErr: `evictionHard["memory.available"]: threshold must be positive`},
		{name: "percentage over 100", in: in{soft: map[string]string{"nodefs.inodesFree": "120%"}, grace: map[string]string{"nodefs.inodesFree": "1m"}},
			wantErr: `evictionSoft["nodefs.inodesFree"]: percentage threshold must be <= 100%: 120%`},
		{name: "negative percentage", in: in{hard: map[string]string{"nodefs.available": "-5%"}},
			wantErr: `evictionHard["nodefs.available"]: percentage threshold must be positive`},
		{name: "not a number", in: in{hard: map[string]string{"nodefs.available": "ten%"}},
			wantErr: `evictionHard["nodefs.available"]: "ten%" is not a percentage`},
		{name: "not a quantity", in: in{hard: map[string]string{"memory.available": "lots"}},
			wantErr: `evictionHard["memory.available"]: "lots" is not a quantity or percentage`},
		{name: "negative grace period", in: in{soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "-1s"}},
			wantErr: `evictionSoftGracePeriod["memory.available"]: "-1s" must not be negative`},
		{name: "bad grace period", in: in{soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "soon"}},
			wantErr: `evictionSoftGracePeriod["memory.available"]: "soon" is not a duration`},
		{name: "grace period of unknown signal", in: in{grace: map[string]string{"disk.available": "1m"}},
			wantErr: `evictionSoftGracePeriod["disk.available"]: unsupported eviction signal`},
		{name: "negative minimum reclaim", in: in{hard: map[string]string{"memory.available": "1Gi"}, reclaim: map[string]string{"memory.available": "-1Mi"}},
			wantErr: `evictionMinimumReclaim["memory.available"]: must not be negative`},
		{name: "zero percent minimum reclaim", in: in{reclaim: map[string]string{"nodefs.available": "0%"}},
			wantErr: `evictionMinimumReclaim["nodefs.available"]: percentage must be positive`},
		{name: "minimum reclaim of unknown signal", in: in{reclaim: map[string]string{"memory": "1Mi"}},
			wantErr: `evictionMinimumReclaim["memory"]: unsupported eviction signal`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := eviction.ParseThresholds(tt.in.hard, tt.in.soft, tt.in.grace, tt.in.reclaim)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, th := range ts {
				s := th.String()
				if th.GracePeriod != 0 {
					s += " grace" + th.GracePeriod.String()
				}
				if th.MinReclaim != nil {
					s += " min" + th.MinReclaim.String()
				}
				got = append(got, s)
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestThresholdKinds(t *testing.T) {
	ts, err := eviction.ParseThresholds(map[string]string{"memory.available": "100Mi", "pid.available": "10%"},
		map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ts[0].Hard() || !ts[1].Hard() || ts[2].Hard() || ts[2].GracePeriod != 2*time.Minute {
		t.Errorf("hard/soft: %+v", ts)
	}
	all := eviction.WithAllocatable(ts)
	if len(all) != 4 || all[3].Signal != eviction.SignalAllocatableMemoryAvailable || all[3].Value.String() != "100Mi" || !all[3].Hard() {
		t.Errorf("WithAllocatable: %v", all)
	}
	for s, want := range map[eviction.Signal]string{
		eviction.SignalMemoryAvailable: "MemoryPressure/memory", eviction.SignalAllocatableMemoryAvailable: "MemoryPressure/memory",
		eviction.SignalNodeFsAvailable: "DiskPressure/ephemeral-storage", eviction.SignalImageFsInodesFree: "DiskPressure/inodes",
		eviction.SignalPIDAvailable: "PIDPressure/pids",
	} {
		if got := string(s.Condition()) + "/" + string(s.Resource()); got != want {
			t.Errorf("%s: %s, want %s", s, got, want)
		}
	}
	if n := len(eviction.Signals()); n != 7 {
		t.Errorf("%d signals, want 7", n)
	}
}
