// Package podsynctest simulates pods for podsync: Backend is a
// podsync.PodSyncer and podsync.Relister whose sandboxes and containers go
// through configurable stages on an injected clock (created, running after
// a start delay, exited after a run time with an exit code, stopped when
// killed), planned by podsync.ComputePodActions so restarts, init
// containers, restart policies and crash-loop back-off follow the kubelet's
// rules. Nothing runs; a fleet of hollow nodes or a controller test can
// drive thousands of pods on a fake clock with podsync.Engine.SyncOnce.
//
// Stages are chosen per pod and container by Options.Stages; Exit makes a
// running container crash now. Terminating stops every container at once
// (StopExitCode) and SyncTerminatedPod forgets the pod.
//
// The package never imports testing, so a binary can embed it.
package podsynctest
