package cri

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UserNamespaceOptions configure the user namespaces of pods with
// spec.hostUsers false, as the kubelet's: each pod gets IDsPerPod host
// IDs of its own, container ID 0 mapped to the first, for UIDs and GIDs
// alike, taken from the node's range and kept in <PodRoot>/<uid>/userns
// (the kubelet's file and format), so that a restarted agent gives a pod
// the range it had and no two pods ever share one. The zero value is the
// kubelet's default.
type UserNamespaceOptions struct {
	// IDsPerPod is the number of IDs of each pod (the kubelet's
	// userNamespaces.idsPerPod). Default 65536; a multiple of 65536.
	IDsPerPod uint32
	// FirstID and Length are the node's range of host IDs. Default (both
	// 0) the kubelet's: when the user "kubelet" exists, its subordinate
	// IDs as `getsubids kubelet` and `getsubids -g kubelet` give them (one
	// range, the same for UIDs and GIDs); otherwise every ID from
	// IDsPerPod on. FirstID must be a multiple of IDsPerPod and at least
	// IDsPerPod (ID 0 is never mapped), Length a multiple of IDsPerPod.
	FirstID, Length uint32
	// MaxPods is how many pods the range must hold (the kubelet's
	// maxPods). Default 110.
	MaxPods int
}

// userNsUnit is the granularity of a pod's range, and the kubelet's
// default number of IDs per pod.
const userNsUnit = 65536

// usernsFile is the name of a pod's mapping file in its directory.
const usernsFile = "userns"

// usernsMapping is a pod's mapping file, in the kubelet's JSON.
type usernsMapping struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// usernsAllocator hands out the pods' ranges: slot i is host IDs
// [(off+i)·perPod, (off+i+1)·perPod).
type usernsAllocator struct {
	perPod uint32
	off, n int
	podDir func(types.UID) string

	mu    sync.Mutex
	used  map[int]types.UID
	byPod map[types.UID]int
}

// newUsernsAllocator checks the options (the kubelet's checks), finds the
// node's range and records the ranges of the pod directories below
// podRoot.
func newUsernsAllocator(o UserNamespaceOptions, podRoot string) (*usernsAllocator, error) {
	if o.IDsPerPod == 0 {
		o.IDsPerPod = userNsUnit
	}
	if o.MaxPods == 0 {
		o.MaxPods = 110
	}
	if o.IDsPerPod%userNsUnit != 0 {
		return nil, fmt.Errorf("cri: Options.UserNamespaces.IDsPerPod %d is not a multiple of %d", o.IDsPerPod, userNsUnit)
	}
	if o.FirstID == 0 && o.Length == 0 {
		var err error
		if o.FirstID, o.Length, err = kubeletIDRange(o.IDsPerPod); err != nil {
			return nil, fmt.Errorf("cri: user namespaces: %w", err)
		}
	}
	switch {
	case o.FirstID%o.IDsPerPod != 0:
		return nil, fmt.Errorf("cri: user namespaces: first ID %d is not a multiple of %d", o.FirstID, o.IDsPerPod)
	case o.FirstID < o.IDsPerPod:
		return nil, fmt.Errorf("cri: user namespaces: first ID %d must be at least %d", o.FirstID, o.IDsPerPod)
	case o.Length%o.IDsPerPod != 0:
		return nil, fmt.Errorf("cri: user namespaces: length %d is not a multiple of %d", o.Length, o.IDsPerPod)
	case int(o.Length/o.IDsPerPod) < o.MaxPods:
		return nil, fmt.Errorf("cri: user namespaces: %d IDs are not enough for %d pods of %d", o.Length, o.MaxPods, o.IDsPerPod)
	}
	a := &usernsAllocator{perPod: o.IDsPerPod, off: int(o.FirstID / o.IDsPerPod), n: int(o.Length / o.IDsPerPod),
		podDir: func(uid types.UID) string { return filepath.Join(podRoot, string(uid)) },
		used:   map[int]types.UID{}, byPod: map[types.UID]int{}}
	dirs, err := os.ReadDir(podRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cri: user namespaces: %w", err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		if err := a.load(types.UID(d.Name())); err != nil {
			return nil, fmt.Errorf("cri: user namespaces of pod %s: %w", d.Name(), err)
		}
	}
	return a, nil
}

// kubeletIDRange is the kubelet's range of host IDs for user namespaces.
func kubeletIDRange(perPod uint32) (first, length uint32, err error) {
	first, length = perPod, uint32((1<<32)-uint64(perPod))
	const name = "kubelet"
	if _, err := user.Lookup(name); err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return first, length, nil
		}
		return 0, 0, err
	}
	cmd, err := exec.LookPath("getsubids")
	if err != nil {
		if os.IsNotExist(err) {
			return first, length, nil
		}
		return 0, 0, err
	}
	uids, err := exec.Command(cmd, name).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional uids for user %q: %w", name, err)
	}
	gids, err := exec.Command(cmd, "-g", name).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional gids for user %q", name)
	}
	if string(uids) != string(gids) {
		return 0, 0, fmt.Errorf("mismatched subuids and subgids for user %q", name)
	}
	return parseSubIDs(string(uids))
}

// parseSubIDs parses getsubids' output: one line "0: kubelet 65536 2147483648".
func parseSubIDs(out string) (first, length uint32, err error) {
	lines := strings.Split(strings.Trim(out, "\n"), "\n")
	if len(lines) != 1 {
		return 0, 0, fmt.Errorf("error parsing line %q: it must contain only one line", out)
	}
	f := strings.Fields(lines[0])
	if len(f) != 4 {
		return 0, 0, fmt.Errorf("invalid line %q", out)
	}
	a, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", out, err)
	}
	b, err := strconv.ParseUint(f[3], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", out, err)
	}
	return uint32(a), uint32(b), nil
}

// load records the range in uid's mapping file, if it has one.
func (a *usernsAllocator) load(uid types.UID) error {
	data, err := os.ReadFile(filepath.Join(a.podDir(uid), usernsFile))
	if errors.Is(err, os.ErrNotExist) || err == nil && len(data) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	var m usernsMapping
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	switch {
	case len(m.UIDMappings) != 1 || len(m.GIDMappings) != 1:
		return errors.New("invalid user namespace configuration: one UID and one GID mapping expected")
	case m.UIDMappings[0] != m.GIDMappings[0]:
		return errors.New("invalid user namespace configuration: GID and UID mapping should be identical")
	case m.UIDMappings[0].ContainerID != 0:
		return errors.New("invalid user namespace configuration: UID 0 must be mapped")
	}
	return a.record(uid, m.UIDMappings[0].HostID, m.UIDMappings[0].Length)
}

// record takes the range at host ID from for uid.
func (a *usernsAllocator) record(uid types.UID, from, length uint32) error {
	if length != a.perPod {
		return fmt.Errorf("wrong user namespace length %d", length)
	}
	if from%a.perPod != 0 {
		return fmt.Errorf("wrong user namespace offset %d", from)
	}
	slot := int(from/a.perPod) - a.off
	if slot < 0 || slot >= a.n {
		return fmt.Errorf("id %d is out of range", from)
	}
	if prev, ok := a.byPod[uid]; ok {
		if prev != slot {
			return fmt.Errorf("different user namespace range already used by pod %q", uid)
		}
		return nil
	}
	if owner, ok := a.used[slot]; ok {
		return fmt.Errorf("range picked for pod %q already taken by pod %q", uid, owner)
	}
	a.used[slot], a.byPod[uid] = uid, slot
	return nil
}

// namespace returns the pod's user namespace for the CRI: the node's
// (mode NODE) unless hostUsers is false; then the pod's own, its range
// read from its directory or allocated and written there first.
// supported says whether the pod's runtime handler can run it.
func (a *usernsAllocator) namespace(pod *corev1.Pod, handler string, supported func(string) (bool, error)) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if ok, err := supported(handler); err != nil || !ok {
		msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		if handler != "" {
			msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", msg, err)
		}
		return nil, errors.New(msg)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	slot, ok := a.byPod[pod.UID]
	if !ok {
		if err := a.load(pod.UID); err != nil {
			return nil, fmt.Errorf("user namespace: %w", err)
		}
		if slot, ok = a.byPod[pod.UID]; !ok {
			var err error
			if slot, err = a.allocate(pod.UID); err != nil {
				return nil, fmt.Errorf("create user namespace: %w", err)
			}
		}
	}
	m := []*runtimeapi.IDMapping{{HostId: uint32(a.off+slot) * a.perPod, ContainerId: 0, Length: a.perPod}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}, nil
}

// allocate takes the first free slot for uid and writes its mapping file
// (atomically and durably); on failure the slot is free again.
func (a *usernsAllocator) allocate(uid types.UID) (int, error) {
	slot := -1
	for i := 0; i < a.n; i++ {
		if _, taken := a.used[i]; !taken {
			slot = i
			break
		}
	}
	if slot < 0 {
		return 0, errors.New("could not find an empty slot to allocate a user namespace")
	}
	id := idMapping{HostID: uint32(a.off+slot) * a.perPod, ContainerID: 0, Length: a.perPod}
	data, err := json.Marshal(usernsMapping{UIDMappings: []idMapping{id}, GIDMappings: []idMapping{id}})
	if err != nil {
		return 0, err
	}
	if err := writeDurably(a.podDir(uid), usernsFile, data); err != nil {
		return 0, err
	}
	a.used[slot], a.byPod[uid] = uid, slot
	return slot, nil
}

// writeDurably writes dir/name through a temporary file renamed over it,
// and syncs both the file and dir.
func writeDurably(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+name+".")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}

// release frees uid's range and removes its mapping file.
func (a *usernsAllocator) release(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	slot, ok := a.byPod[uid]
	if !ok {
		return
	}
	_ = os.Remove(filepath.Join(a.podDir(uid), usernsFile))
	delete(a.byPod, uid)
	delete(a.used, slot)
}

// allocated returns the number of pods holding a range.
func (a *usernsAllocator) allocated() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byPod)
}
