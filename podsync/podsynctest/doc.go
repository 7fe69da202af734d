// Package podsynctest simulates pods for podsync: Backend is a
// podsync.PodSyncer and podsync.PodRelister whose sandboxes and containers go
// through configurable stages on an injected clock (created, running after
// a start delay, exited after a run time with an exit code, stopped when
// killed), planned by podsync.ComputePodActions so restarts, init
// containers, restart policies and crash-loop back-off follow the kubelet's
// rules. Nothing runs; a fleet of hollow nodes or a controller test can
// drive thousands of pods on a fake clock with podsync.Engine.SyncOnce.
// Stages are chosen per container by Options.Stages; Exit makes a running
// container crash now; Options.Probes lets failed liveness and startup
// probes restart containers. Terminating stops every container at once
// (StopExitCode) and SyncTerminatedPod forgets the pod.
//
// Package podsynctest/simapi serves a hollow node's node API from the
// simulation: its containers' usage by the rules (Rules.Usage,
// Rules.CPUTime) and a log line per container run (Backend.Runs).
//
// # Rules
//
// Rules say in a file (ParseRules, LoadRules; YAML or JSON, decoded
// strictly, at most MaxRulesBytes and MaxRules) how pods behave:
//
//	rules:
//	- name: web                    # optional, for error messages
//	  selector:                    # all optional; all must match
//	    matchLabels: {app: web}    # a metav1.LabelSelector
//	    matchExpressions: [{key: tier, operator: NotIn, values: [db]}]
//	    namespaces: [default]
//	    namePrefix: web-
//	    ownerKind: ReplicaSet      # an owner reference of this kind
//	    containers: [app]          # only these containers
//	  startDelay: 2s               # created to running
//	  runFor: 0s                   # then exit with exitCode (0: until stopped)
//	  exitCode: 0
//	  stopExitCode: 137            # when killed
//	  failCreate: ""               # a CreateContainerError message
//	  startupDelay: 0s             # startup probes fail until then
//	  readinessDelay: 5s           # readiness probes fail until then
//	  livenessFailAfter: 0s        # liveness probes fail from then (0: never)
//	  cpu: {from: 10m, to: 200m, over: 5m}  # or a constant: cpu: 100m
//	  memory: 64Mi
//
// For each container the first rule that matches its pod and name wins;
// the fields it leaves out, and every field of a container no rule
// matches, are the default. Durations are Go's ("1m30s"), quantities
// Kubernetes' ("250m", "64Mi"); probe delays count from the container's
// start. A runFor applies to init containers too (whose default is to
// complete): match containers to keep them out. Annotations on the pod
// override the rule for all its
// containers: sim.nodekit.io/ start-delay, run-for, exit-code,
// stop-exit-code, fail-create, startup-delay, readiness-delay,
// liveness-fail-after, cpu, memory (the Annotation constants). A value
// that does not parse, or an unknown sim.nodekit.io/ key, fails the
// container's creation with a message naming the annotation.
//
// Rules.Stages is Options.Stages. Rules.Prober, for the pod half's probe
// manager, passes or fails a probe by its container's time since start,
// which it asks the Backend (StartedAt). The Backend is built with the
// manager, the manager with the prober: the lookup closes over the Backend.
//
//	var sim *podsynctest.Backend
//	prober, err := rules.Prober(podsynctest.ProberOptions{Clock: clk,
//		StartedAt: func(uid types.UID, id string) (time.Time, bool) { return sim.StartedAt(uid, id) }})
//	// PodHalfOptions.Prober: prober; in PodHalfOptions.Backend:
//	sim = podsynctest.New(podsynctest.Options{Clock: clk, Stages: rules.Stages, Probes: parts.Probes})
//
// Rules.Usage is a container's CPU and memory at a time since start. Each
// call matches the rules anew (linear in their number); nothing is kept.
//
// # The default is kwok's
//
// Without rules or annotations pods behave as under kwok's default pod
// stages (its "fast" set), and these rules would say the same:
//   - pod-ready (a pending pod's containers run and are ready, its init
//     containers have completed): no rule; containers run at once, probes
//     pass at their first run, and an init container that is not a
//     sidecar exits 0 right after it started (runFor 1ms).
//   - pod-complete (a running pod owned by a Job succeeds):
//     {selector: {ownerKind: Job}, runFor: 1ms}.
//   - pod-delete (a pod being deleted goes): no rule; the Backend stops
//     the containers at once (stopExitCode 137) and the pod half deletes it.
//
// kwok's "general" set waits 1s plus up to 5s of jitter per stage: a
// startDelay, without jitter. Its chaos stage pod-container-running-failed
// is {runFor: 1s, exitCode: 1} on the pods it labels.
//
// The package never imports testing, so a binary can embed it.
package podsynctest
