package usage

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/runtime"
)

// pods adds the pods of the ready sandboxes, with their running containers,
// to s. Pods' CPU and memory come from the pod's cgroup with
// Options.PodCgroupDirs, else from ListPodSandboxStats where the runtime has
// it, or else the sums of the containers'; containers' from their cgroups
// below their pod's, else from ListContainerStats, which is asked every
// VolumeInterval anyway for the writable layers (and at every sample a
// container has no cgroup figures).
func (c *Collector) pods(ctx context.Context, now time.Time, s *statsapi.Summary, nodeFs fsInfo, haveNodeFs bool, next map[string]cpuPoint) error {
	logger := klog.FromContext(ctx)
	rt := c.opts.Runtime
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	// The image file system, which holds the writable layers too.
	var imageFs fsInfo
	haveImageFs := false
	if resp, err := rt.ImageFsInfo(ctx); err == nil && len(resp.GetImageFilesystems()) > 0 {
		fu := resp.ImageFilesystems[0]
		if info, err := statfs(fu.GetFsId().GetMountpoint()); err == nil {
			imageFs, haveImageFs = info, true
		}
		fs := &statsapi.FsStats{Time: metav1.NewTime(nanoTime(fu.GetTimestamp(), now)),
			UsedBytes: u64p(fu.GetUsedBytes().GetValue()), InodesUsed: u64p(fu.GetInodesUsed().GetValue())}
		if haveImageFs {
			fs.CapacityBytes, fs.AvailableBytes = u64p(imageFs.capacity), u64p(imageFs.available)
			fs.Inodes, fs.InodesFree = u64p(imageFs.inodes), u64p(imageFs.inodesFree)
		}
		s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: fs, ContainerFs: fs}
	} else if err != nil {
		logger.V(4).Info("Reading the image file system", "err", err)
	}

	// One ready sandbox per pod UID, the newest.
	byUID := map[string]*runtimeapi.PodSandbox{}
	for _, sb := range sandboxes {
		uid := sb.GetMetadata().GetUid()
		if old, ok := byUID[uid]; !ok || sb.CreatedAt > old.CreatedAt {
			byUID[uid] = sb
		}
	}
	// A pod's cgroup first (as the kubelet's cAdvisor); sandbox stats only
	// for pods without one: containerd 1.6 answers ListPodSandboxStats with
	// a `runc ps` for every pod, which on a full node costs the machine
	// more than everything else the collector does. A pod's directories are
	// looked up once and kept while it is listed and its cgroup reads, so a
	// sample does not stat every hierarchy of every QoS class again.
	for uid := range c.files {
		if _, ok := byUID[uid]; !ok {
			delete(c.files, uid)
		}
	}
	needSandboxStats := false
	for uid := range byUID {
		pf := c.files[uid]
		if pf == nil {
			pf = &podFiles{}
			if c.opts.PodCgroupDirs != nil {
				pf.dirs = c.opts.PodCgroupDirs(uid)
			}
			c.files[uid] = pf
		}
		needSandboxStats = needSandboxStats || len(pf.dirs) == 0
	}
	var sbStats map[string]*runtimeapi.PodSandboxStats
	if needSandboxStats && !c.noSandboxStats {
		list, err := rt.ListPodSandboxStats(ctx, nil)
		switch {
		case runtime.IsUnimplemented(err):
			c.noSandboxStats = true
		case err != nil:
			logger.V(2).Info("Listing pod sandbox stats; pods without a cgroup sum their containers this time", "err", err)
		default:
			sbStats = make(map[string]*runtimeapi.PodSandboxStats, len(list))
			for _, st := range list {
				sbStats[st.GetAttributes().GetId()] = st
			}
		}
	}
	// One running container per sandbox and name, the newest.
	type key struct{ sandbox, name string }
	byName := map[key]*runtimeapi.Container{}
	for _, ctr := range containers {
		k := key{ctr.PodSandboxId, ctr.GetMetadata().GetName()}
		if old, ok := byName[k]; !ok || ctr.CreatedAt > old.CreatedAt {
			byName[k] = ctr
		}
	}
	perSandbox := map[string][]*runtimeapi.Container{}
	for k, ctr := range byName {
		perSandbox[k.sandbox] = append(perSandbox[k.sandbox], ctr)
	}
	// A container of a pod with a cgroup: its CPU and memory from its own
	// cgroup, below the pod's; CRI container stats only for containers
	// without, and for the writable layers every VolumeInterval.
	ctrCgroups := make(map[string]cgroupUsage, len(byName))
	needStats := c.layersAt.IsZero() || now.Sub(c.layersAt) >= c.opts.VolumeInterval
	for _, sb := range byUID {
		pf := c.files[sb.GetMetadata().GetUid()]
		for _, ctr := range perSandbox[sb.Id] {
			if cg, ok := c.containerCgroup(ctx, ctr.Id, pf); ok {
				ctrCgroups[ctr.Id] = cg
			} else {
				needStats = true
			}
		}
	}
	for id := range c.ctrs {
		if _, ok := ctrCgroups[id]; !ok {
			delete(c.ctrs, id)
		}
	}
	var cstats map[string]*runtimeapi.ContainerStats
	if needStats {
		list, err := rt.ListContainerStats(ctx, nil)
		if err != nil {
			return fmt.Errorf("pods: %w", err)
		}
		cstats = make(map[string]*runtimeapi.ContainerStats, len(list))
		c.layers = make(map[string]*runtimeapi.FilesystemUsage, len(list))
		for _, cs := range list {
			id := cs.GetAttributes().GetId()
			cstats[id] = cs
			if wl := cs.GetWritableLayer(); wl != nil {
				c.layers[id] = wl
			}
		}
		c.layersAt = now
	}

	for _, sb := range byUID {
		md := sb.GetMetadata()
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime:  metav1.NewTime(time.Unix(0, sb.CreatedAt)),
			Containers: []statsapi.ContainerStats{},
		}
		logDir := filepath.Join(c.opts.PodLogRoot, md.GetNamespace()+"_"+md.GetName()+"_"+md.GetUid())
		var sum cgroupUsage
		var sumTime time.Time
		var ephemeral, ephemeralInodes uint64
		ctrs := perSandbox[sb.Id]
		slices.SortFunc(ctrs, func(a, b *runtimeapi.Container) int {
			return cmp.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName())
		})
		for _, ctr := range ctrs {
			cs := statsapi.ContainerStats{Name: ctr.GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, ctr.CreatedAt))}
			if cg, ok := ctrCgroups[ctr.Id]; ok {
				if cg.hasCPU {
					cs.CPU = c.cpu("container/"+ctr.Id, now, cg.cpuNanos, 0, next)
					sum.cpuNanos += cg.cpuNanos
					sum.hasCPU = true
					sumTime = later(sumTime, now)
				}
				if cg.hasMemory {
					cs.Memory = memory(now, cg, cg.limit)
					sum.usage += cg.usage
					sum.inactiveFile += cg.inactiveFile
					sum.rss += cg.rss
					sum.pgfault += cg.pgfault
					sum.pgmajf += cg.pgmajf
					sum.hasMemory = true
				}
			} else {
				st := cstats[ctr.Id]
				if cpu := st.GetCpu(); cpu != nil {
					t := nanoTime(cpu.Timestamp, now)
					cum := cpu.GetUsageCoreNanoSeconds().GetValue()
					cs.CPU = c.cpu("container/"+ctr.Id, t, cum, cpu.GetUsageNanoCores().GetValue(), next)
					sum.cpuNanos += cum
					sum.hasCPU = true
					sumTime = later(sumTime, t)
				}
				if mem := st.GetMemory(); mem != nil {
					cs.Memory = criMemory(mem, now)
					sum.usage += mem.GetUsageBytes().GetValue()
					sum.inactiveFile += mem.GetUsageBytes().GetValue() - min(mem.GetWorkingSetBytes().GetValue(), mem.GetUsageBytes().GetValue())
					sum.rss += mem.GetRssBytes().GetValue()
					sum.pgfault += mem.GetPageFaults().GetValue()
					sum.pgmajf += mem.GetMajorPageFaults().GetValue()
					sum.hasMemory = true
				}
			}
			if wl := c.layers[ctr.Id]; wl != nil {
				fs := &statsapi.FsStats{Time: metav1.NewTime(nanoTime(wl.Timestamp, now)),
					UsedBytes: u64p(wl.GetUsedBytes().GetValue()), InodesUsed: u64p(wl.GetInodesUsed().GetValue())}
				if haveImageFs {
					fs.CapacityBytes, fs.AvailableBytes = u64p(imageFs.capacity), u64p(imageFs.available)
					fs.Inodes, fs.InodesFree = u64p(imageFs.inodes), u64p(imageFs.inodesFree)
				}
				cs.Rootfs = fs
				ephemeral += wl.GetUsedBytes().GetValue()
				ephemeralInodes += wl.GetInodesUsed().GetValue()
			}
			if used, inodes, err := dirUsage(filepath.Join(logDir, cs.Name)); err == nil {
				fs := &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: u64p(used), InodesUsed: u64p(inodes)}
				if haveNodeFs {
					fs.CapacityBytes, fs.AvailableBytes = u64p(nodeFs.capacity), u64p(nodeFs.available)
					fs.Inodes, fs.InodesFree = u64p(nodeFs.inodes), u64p(nodeFs.inodesFree)
				}
				cs.Logs = fs
				ephemeral += used
				ephemeralInodes += inodes
			}
			ps.Containers = append(ps.Containers, cs)
		}

		key := "pod/" + md.GetUid()
		pf := c.files[md.GetUid()]
		if cg, ok := c.podCgroup(ctx, md.GetUid(), pf); ok {
			if ifaces, ok := c.host.podNetwork(pf); ok {
				ps.Network = netStats(metav1.NewTime(now), ifaces, "eth0")
			}
			if cg.hasCPU {
				ps.CPU = c.cpu(key, now, cg.cpuNanos, 0, next)
			}
			if cg.hasMemory {
				ps.Memory = memory(now, cg, cg.limit)
			}
			if cg.hasProcesses {
				ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64p(cg.processes)}
			}
		} else if sbs := sbStats[sb.Id]; sbs.GetLinux() != nil {
			l := sbs.Linux
			if cpu := l.GetCpu(); cpu != nil {
				ps.CPU = c.cpu(key, nanoTime(cpu.Timestamp, now), cpu.GetUsageCoreNanoSeconds().GetValue(), cpu.GetUsageNanoCores().GetValue(), next)
			}
			if mem := l.GetMemory(); mem != nil {
				ps.Memory = criMemory(mem, now)
			}
			if n := l.GetNetwork(); n != nil {
				ps.Network = criNetwork(n, now)
			}
			if p := l.GetProcess(); p != nil && p.ProcessCount != nil {
				ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: u64p(p.ProcessCount.Value)}
			}
		} else {
			if sum.hasCPU {
				ps.CPU = c.cpu(key, sumTime, sum.cpuNanos, 0, next)
			}
			if sum.hasMemory {
				ps.Memory = memory(now, sum, 0)
			}
		}
		if c.opts.PodVolumeDirs != nil {
			vols, at := c.podVolumes(md.GetUid(), now)
			for _, v := range vols {
				fs := statsapi.FsStats{Time: metav1.NewTime(at), UsedBytes: u64p(v.used), InodesUsed: u64p(v.inodes)}
				if haveNodeFs {
					fs.CapacityBytes, fs.AvailableBytes = u64p(nodeFs.capacity), u64p(nodeFs.available)
					fs.Inodes, fs.InodesFree = u64p(nodeFs.inodes), u64p(nodeFs.inodesFree)
				}
				ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: v.name, FsStats: fs})
				ephemeral += v.used
				ephemeralInodes += v.inodes
			}
		}
		if len(ctrs) > 0 {
			fs := &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: u64p(ephemeral), InodesUsed: u64p(ephemeralInodes)}
			if haveNodeFs {
				fs.CapacityBytes, fs.AvailableBytes = u64p(nodeFs.capacity), u64p(nodeFs.available)
				fs.Inodes, fs.InodesFree = u64p(nodeFs.inodes), u64p(nodeFs.inodesFree)
			}
			ps.EphemeralStorage = fs
		}
		s.Pods = append(s.Pods, ps)
	}
	slices.SortFunc(s.Pods, func(a, b statsapi.PodStats) int {
		return cmp.Or(cmp.Compare(a.PodRef.Namespace, b.PodRef.Namespace), cmp.Compare(a.PodRef.Name, b.PodRef.Name), cmp.Compare(a.PodRef.UID, b.PodRef.UID))
	})
	return nil
}

// podFiles is where a pod's figures are read from, kept between samples.
type podFiles struct {
	dirs        []string  // its cgroup's directories (none: no cgroup)
	pid         string    // a process in it, for its network namespace ("": look again)
	hostNetwork bool      // pid was in the host's network namespace: the pod has no network figures of its own
	loc         cgroupLoc // where in dirs its figures are
	vols        []volumeUsage
	volsAt      time.Time // when vols were measured (zero: not yet)
}

// volumeUsage is one volume's directory as last measured.
type volumeUsage struct {
	name         string
	used, inodes uint64
}

// podVolumes returns a pod's volumes on disk by name, measured at most
// VolumeInterval before now, and when they were measured. A pod whose
// files the sample keeps (c.files) keeps its figures until they are due;
// one it does not is measured every sample.
func (c *Collector) podVolumes(uid string, now time.Time) ([]volumeUsage, time.Time) {
	pf := c.files[uid]
	if pf != nil && !pf.volsAt.IsZero() && now.Sub(pf.volsAt) < c.opts.VolumeInterval {
		return pf.vols, pf.volsAt
	}
	dirs := c.opts.PodVolumeDirs(uid)
	names := make([]string, 0, len(dirs))
	for name := range dirs {
		names = append(names, name)
	}
	slices.Sort(names)
	var vols []volumeUsage
	for _, name := range names {
		used, inodes, err := dirUsage(dirs[name])
		if err != nil || inodes == 0 { // no directory: not set up, or gone
			continue
		}
		vols = append(vols, volumeUsage{name: name, used: used, inodes: inodes})
	}
	if pf != nil {
		pf.vols, pf.volsAt = vols, now
	}
	return vols, now
}

// ctrFiles is where a container's figures are read from, kept between
// samples.
type ctrFiles struct {
	dirs []string  // its cgroup's directories
	loc  cgroupLoc // where in dirs its figures are
}

// containerCgroup reads the cgroup of a container of a pod with a cgroup
// (pf), the directory named by the container's ID below each of the pod's
// (where containerd puts it with the cgroupfs driver), and reports whether
// it had CPU or memory figures. A container without any is looked for
// again at the next sample, and its figures asked of the runtime.
func (c *Collector) containerCgroup(ctx context.Context, id string, pf *podFiles) (cgroupUsage, bool) {
	if pf == nil || len(pf.dirs) == 0 {
		return cgroupUsage{}, false
	}
	cf := c.ctrs[id]
	if cf == nil {
		cf = &ctrFiles{dirs: make([]string, len(pf.dirs))}
		for i, d := range pf.dirs {
			cf.dirs[i] = filepath.Join(d, id)
		}
	}
	cg, err := c.host.cgroup(cf.dirs, &cf.loc)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Reading a container cgroup", "containerID", id, "err", err)
	}
	if !cg.hasCPU && !cg.hasMemory {
		delete(c.ctrs, id)
		return cg, false
	}
	c.ctrs[id] = cf
	return cg, true
}

// podCgroup reads a pod's cgroup and reports whether it had CPU or memory
// figures; a pod whose cgroup did not is looked up again at the next
// sample.
func (c *Collector) podCgroup(ctx context.Context, uid string, pf *podFiles) (cgroupUsage, bool) {
	if pf == nil || len(pf.dirs) == 0 {
		return cgroupUsage{}, false
	}
	cg, err := c.host.cgroup(pf.dirs, &pf.loc)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Reading a pod cgroup", "podUID", uid, "err", err)
	}
	if !cg.hasCPU && !cg.hasMemory {
		delete(c.files, uid)
		return cg, false
	}
	return cg, true
}

// nanoTime is a CRI timestamp (ns since the epoch), or def when it is 0.
func nanoTime(ns int64, def time.Time) time.Time {
	if ns == 0 {
		return def
	}
	return time.Unix(0, ns)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func criMemory(m *runtimeapi.MemoryUsage, now time.Time) *statsapi.MemoryStats {
	out := &statsapi.MemoryStats{Time: metav1.NewTime(nanoTime(m.Timestamp, now))}
	set := func(v *runtimeapi.UInt64Value) *uint64 {
		if v == nil {
			return nil
		}
		return u64p(v.Value)
	}
	out.WorkingSetBytes = set(m.WorkingSetBytes)
	out.AvailableBytes = set(m.AvailableBytes)
	out.UsageBytes = set(m.UsageBytes)
	out.RSSBytes = set(m.RssBytes)
	out.PageFaults = set(m.PageFaults)
	out.MajorPageFaults = set(m.MajorPageFaults)
	return out
}

func criNetwork(n *runtimeapi.NetworkUsage, now time.Time) *statsapi.NetworkStats {
	conv := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		return statsapi.InterfaceStats{Name: i.GetName(),
			RxBytes: u64p(i.GetRxBytes().GetValue()), RxErrors: u64p(i.GetRxErrors().GetValue()),
			TxBytes: u64p(i.GetTxBytes().GetValue()), TxErrors: u64p(i.GetTxErrors().GetValue())}
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(nanoTime(n.Timestamp, now))}
	if d := n.GetDefaultInterface(); d != nil {
		out.InterfaceStats = conv(d)
		out.Interfaces = append(out.Interfaces, out.InterfaceStats)
	}
	for _, i := range n.GetInterfaces() {
		if i.GetName() != out.InterfaceStats.Name {
			out.Interfaces = append(out.Interfaces, conv(i))
		}
	}
	return out
}
