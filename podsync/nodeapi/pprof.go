package nodeapi

import (
	"fmt"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// MaxProfileSeconds bounds a CPU profile's ?seconds= (kubelet's own bound
// is the API server's request timeout; a profile longer than that would
// outlive any client that asked through it).
const MaxProfileSeconds = 300

// profile serves /debug/pprof/, as the kubelet's profiling handler
// (enableProfilingHandler, on by default) does: /debug/pprof/ lists the
// profiles, /debug/pprof/profile?seconds=N is a CPU profile of N seconds
// (default 30), and /debug/pprof/<name> (heap, allocs, goroutine, block,
// mutex, threadcreate) writes that profile, as text with ?debug=1 or 2. It
// uses runtime/pprof directly: importing net/http/pprof would register its
// handlers on http.DefaultServeMux, a global the users of the library may
// serve.
func (h *Handler) profile(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	switch name {
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, p := range pprof.Profiles() {
			fmt.Fprintf(w, "%d\t%s\n", p.Count(), p.Name())
		}
		fmt.Fprintf(w, "\tprofile (CPU, ?seconds=N, default 30)\n")
		return
	case "profile":
		h.cpuProfile(w, r)
		return
	}
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, fmt.Sprintf("unknown profile %q", name), http.StatusNotFound)
		return
	}
	debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
	if debug < 0 || debug > 2 {
		http.Error(w, fmt.Sprintf("debug=%d: must be 0, 1 or 2", debug), http.StatusBadRequest)
		return
	}
	if debug > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	// An error here is the client's connection failing: the status line
	// is already sent and the client sees a cut-short body.
	_ = p.WriteTo(w, debug)
}

func (h *Handler) cpuProfile(w http.ResponseWriter, r *http.Request) {
	seconds := 30
	if s := r.URL.Query().Get("seconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxProfileSeconds {
			http.Error(w, fmt.Sprintf("seconds=%q: must be a whole number from 1 to %d", s, MaxProfileSeconds), http.StatusBadRequest)
			return
		}
		seconds = n
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	if err := pprof.StartCPUProfile(w); err != nil {
		// Another CPU profile is running (the Go runtime allows one).
		w.Header().Del("Content-Disposition")
		http.Error(w, "cannot start a CPU profile: "+err.Error(), http.StatusConflict)
		return
	}
	t := h.opts.Clock.NewTimer(time.Duration(seconds) * time.Second)
	defer t.Stop()
	select {
	case <-t.C():
	case <-r.Context().Done():
	}
	pprof.StopCPUProfile()
}
