package nodeapi

import (
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func metav1TypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: "v1"}
}

// summary serves the last sample as kubelet's Summary; with
// only_cpu_and_memory=true, only the fields kubelet's CPU-and-memory summary
// has (names, start times, CPU, memory).
func (h *Handler) summary(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	only := false
	if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, "only_cpu_and_memory: "+err.Error(), http.StatusBadRequest)
			return
		}
		only = b
	}
	if h.opts.Stats == nil {
		http.Error(w, "no stats provider", http.StatusServiceUnavailable)
		return
	}
	snap := h.opts.Stats.Latest()
	if snap == nil || snap.Summary == nil {
		http.Error(w, errNoSample.Error(), http.StatusServiceUnavailable)
		return
	}
	if only {
		writeJSON(w, cpuAndMemory(snap.Summary))
		return
	}
	writeJSON(w, snap.Summary)
}

// cpuAndMemory copies the CPU and memory part of s.
func cpuAndMemory(s *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{
		Node: statsapi.NodeStats{
			NodeName:         s.Node.NodeName,
			SystemContainers: s.Node.SystemContainers,
			StartTime:        s.Node.StartTime,
			CPU:              s.Node.CPU,
			Memory:           s.Node.Memory,
		},
		Pods: make([]statsapi.PodStats, 0, len(s.Pods)),
	}
	for _, p := range s.Pods {
		op := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory,
			Containers: make([]statsapi.ContainerStats, 0, len(p.Containers))}
		for _, c := range p.Containers {
			op.Containers = append(op.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory})
		}
		out.Pods = append(out.Pods, op)
	}
	return out
}
