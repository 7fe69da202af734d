// Package runtimetest provides an in-memory fake of runtime.Runtime and a gRPC
// server that serves any runtime.Runtime as CRI v1. It does not import
// package testing, so a binary (a demo agent, a simulator) may embed the
// fake. The contract suite that checks a Runtime behaves like a CRI runtime
// is in runtimetest/contract.
//
// # The fake
//
// New returns a Runtime that keeps sandboxes, containers and images in memory.
// Sandboxes are READY after RunPodSandbox and NOTREADY after StopPodSandbox;
// containers are CREATED, RUNNING after StartContainer, and EXITED after
// StopContainer (exit code StopExitCode, 137), StopPodSandbox, or Exit(id,
// code), which a test calls to make a container end on its own. Creation,
// start and finish times come from Options.Clock, so a test can drive them
// with a fake clock. Lists filter by ID (or ID prefix), state, sandbox and
// label selector, oldest first. Nothing runs: ExecSync answers what
// ScriptExec scripted (per container, per command, or both; a script can time
// out with an error matching runtime.ErrExecTimeout), or exit code 0. ExecSync
// in a container that is not running fails like containerd's ("container is
// in CONTAINER_EXITED state").
//
// Exec, Attach and PortForward hand out URLs on a streaming server that the
// test runs (SetStreamURL: <base>/exec/<token> and so on; until it is set
// they answer Unimplemented), after the checks a CRI runtime makes: the
// container running (the sandbox ready, for PortForward), a command, at
// least one of stdin, stdout and stderr, and not both a tty and stderr.
// StreamRequest tells that server what a URL was handed out for.
//
// Tests steer the fake with Hooks (Options.Hooks, SetHooks: a typed hook
// per method that can fail or observe its calls; Errors fails the next few),
// SetCondition (RuntimeReady or NetworkReady false for node status
// tests), AddImage (images with sizes, for node status and image GC),
// SetContainerUsage and SetPodSandboxUsage (the figures the CRI stats calls
// report; SetPodSandboxStatsUnimplemented makes the sandbox ones answer
// Unimplemented, as an older containerd may), and read
// what happened with Calls and CallCount (Options.NoCallLog turns the log off, for a fake
// that runs as long as a process does). Missing objects are gRPC NotFound errors
// (runtime.IsNotFound), and stop and remove of something gone succeed, as CRI
// specifies. All methods are safe for concurrent use.
//
// The fake streams container events as containerd 2 does
// (WatchContainerEvents, a runtime.ContainerEventWatcher): created, started,
// stopped and deleted, for containers and sandboxes, each with the
// sandbox's status and its containers' statuses. SetContainerEvents(false)
// makes it answer Unimplemented instead, as containerd 1.6 does, and
// EndContainerEvents ends the open streams, as a runtime restart does.
//
// # The server
//
// NewServer(rt).Register(grpcServer) serves rt as runtime.v1 RuntimeService and
// ImageService, so a CRI client (remote.Client or another) can be tested over
// a real socket, with the fake's controls behind it, GetContainerEvents
// included.
package runtimetest
