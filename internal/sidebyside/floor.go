package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// CRI is the part of a CRI client the floor's workload calls;
// runtime.Runtime (and so runtime/remote's Client, the agent's) has it.
type CRI interface {
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, containerID string) error
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
}

// RuntimePod is one pod of the floor's workload: its sandbox and the
// containers to create and start in it, in order.
type RuntimePod struct {
	Sandbox    *runtimeapi.PodSandboxConfig
	Containers []*runtimeapi.ContainerConfig
	// Started, when set, is called with the containers' IDs once the
	// last StartContainer has returned, outside the pod's slot (an
	// agent's engine frees a sync's slot before the pod is Ready); the
	// pod's time runs until it returns (a wait for its server to
	// answer, as a readiness probe would), and its error is the pod's.
	Started func(ctx context.Context, containerIDs []string) error
}

// AsNodesSend gives a floor pod's configs what the kubelet's and the
// agent's configs of the same BestEffort host-network pod carry and the
// runtime spends time on, so that the floor makes the nodes' CRI calls:
// the sandbox runs with the runtime's default seccomp profile (both nodes
// ask for it whatever the pod's, RunPodSandbox about 10 ms slower here);
// each container shares the sandbox's namespaces, runs unconfined by
// seccomp (both nodes' default), has BestEffort's CPU
// shares and OOM score, and gets the pod's hosts file at /etc/hosts and an
// empty termination-message file at /dev/termination-log, bind mounts of
// files it writes below podDir (<podDir>/etc-hosts, a copy of hostsFile,
// and <podDir>/containers/<name>/0), which the caller removes.
func AsNodesSend(p *RuntimePod, podDir, hostsFile string) error {
	lx := p.Sandbox.GetLinux()
	if lx == nil || lx.SecurityContext == nil {
		return fmt.Errorf("sidebyside: AsNodesSend: sandbox %q has no Linux security context", p.Sandbox.GetMetadata().GetName())
	}
	lx.SecurityContext.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	hosts, err := os.ReadFile(hostsFile)
	if err != nil {
		return fmt.Errorf("sidebyside: AsNodesSend: %w", err)
	}
	podHosts := filepath.Join(podDir, "etc-hosts")
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		return fmt.Errorf("sidebyside: AsNodesSend: %w", err)
	}
	if err := os.WriteFile(podHosts, hosts, 0o644); err != nil {
		return fmt.Errorf("sidebyside: AsNodesSend: %w", err)
	}
	for _, c := range p.Containers {
		term := filepath.Join(podDir, "containers", c.GetMetadata().GetName(), "0")
		if err := os.MkdirAll(filepath.Dir(term), 0o755); err != nil {
			return fmt.Errorf("sidebyside: AsNodesSend: %w", err)
		}
		if err := os.WriteFile(term, nil, 0o666); err != nil {
			return fmt.Errorf("sidebyside: AsNodesSend: %w", err)
		}
		c.Mounts = append(c.Mounts,
			&runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: podHosts},
			&runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: term})
		if c.Linux == nil {
			c.Linux = &runtimeapi.LinuxContainerConfig{}
		}
		c.Linux.Resources = &runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000}
		c.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: lx.SecurityContext.NamespaceOptions,
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}}
	}
	return nil
}

// StartPods starts pods straight over CRI, with no agent: RunPodSandbox,
// then CreateContainer and StartContainer for each container, par pods at
// a time, every pod asked for at the call; then, with its slot given back,
// its Started. It returns each pod's sandbox ID ("" where RunPodSandbox
// failed), the time from the call to its last StartContainer's return (or
// Started's; what the pod waited for a slot included), and the errors,
// joined; the pods that started are started whatever failed.
func StartPods(ctx context.Context, rt CRI, pods []RuntimePod, par int) (ids []string, took []time.Duration, err error) {
	if par < 1 {
		return nil, nil, fmt.Errorf("sidebyside: StartPods: parallelism %d, want at least 1", par)
	}
	ids = make([]string, len(pods))
	took = make([]time.Duration, len(pods))
	errs := make([]error, len(pods))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			id, cids, err := startPod(ctx, rt, p)
			<-sem
			ids[i], errs[i] = id, err
			if id == "" {
				return
			}
			if p.Started != nil && err == nil {
				errs[i] = p.Started(ctx, cids)
			}
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return ids, took, errors.Join(errs...)
}

// startPod runs p's sandbox and starts its containers; it returns the
// sandbox's ID ("" if it did not run), the containers' and the errors.
func startPod(ctx context.Context, rt CRI, p RuntimePod) (string, []string, error) {
	id, err := rt.RunPodSandbox(ctx, p.Sandbox, "")
	if err != nil {
		return "", nil, err
	}
	var cids []string
	var errs []error
	for _, cc := range p.Containers {
		cid, err := rt.CreateContainer(ctx, id, cc, p.Sandbox)
		if err == nil {
			cids = append(cids, cid)
			err = rt.StartContainer(ctx, cid)
		}
		errs = append(errs, err)
	}
	return id, cids, errors.Join(errs...)
}

// RemovePods stops (StopPodSandbox) and then removes (RemovePodSandbox)
// each sandbox straight over CRI, par at a time, all asked for at the
// call; empty IDs are skipped. A stop that runs out of the client's
// request timeout is asked again (up to stopAttempts times), as an agent
// retries a failed stop. It returns the time from the call to the
// last StopPodSandbox's return (no sandbox ready) and to the last
// RemovePodSandbox's (none left), and the errors, joined.
func RemovePods(ctx context.Context, rt CRI, ids []string, par int) (stopped, removed time.Duration, err error) {
	if par < 1 {
		return 0, 0, fmt.Errorf("sidebyside: RemovePods: parallelism %d, want at least 1", par)
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range ids {
		if id == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			serr := stopSandbox(ctx, rt, id)
			s := time.Since(start)
			rerr := rt.RemovePodSandbox(ctx, id)
			r := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			stopped, removed = max(stopped, s), max(removed, r)
			errs = append(errs, serr, rerr)
		}()
	}
	wg.Wait()
	return stopped, removed, errors.Join(errs...)
}

// stopAttempts bounds RemovePods' StopPodSandbox calls for one sandbox.
const stopAttempts = 5

// stopSandbox stops sandbox id, asking again while the call runs out of
// time (containerd 1.6 stopping a few hundred pods at once on a slow
// machine takes longer than the 2-minute request timeout for some).
func stopSandbox(ctx context.Context, rt CRI, id string) error {
	for attempt := 1; ; attempt++ {
		err := rt.StopPodSandbox(ctx, id)
		if err == nil || ctx.Err() != nil || attempt == stopAttempts || runtime.Code(err) != codes.DeadlineExceeded {
			return err
		}
	}
}
