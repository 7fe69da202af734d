// Package runtimetest provides an in-memory fake of runtime.Runtime, a gRPC
// server that serves any runtime.Runtime as CRI v1, and a contract suite that
// checks a Runtime behaves like a CRI runtime.
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
// Tests steer the fake with InjectError (the next call of a named method
// fails), SetCondition (RuntimeReady or NetworkReady false for node status
// tests), AddImage (images with sizes, for node status and image GC), and read
// what happened with Calls. Missing objects are gRPC NotFound errors
// (runtime.IsNotFound), and stop and remove of something gone succeed, as CRI
// specifies. All methods are safe for concurrent use.
//
// # The server
//
// NewServer(rt).Register(grpcServer) serves rt as runtime.v1 RuntimeService and
// ImageService, so a CRI client (runtime.Client or another) can be tested over
// a real socket, with the fake's controls behind it.
//
// # The contract suite
//
// RunContract runs the same cases on any Runtime: lifecycles with states and
// times, list filters, ExecSync success, non-zero exit and timeout, a stop
// whose SIGTERM is ignored (on a real runtime it must take the grace period
// and end with exit code 137), removal of running things, idempotent stop and
// remove, NotFound for missing objects, and the optional container events and
// metrics (a skip where the runtime answers Unimplemented, as containerd 1.6
// does). ContractTarget.Fake tells the suite it runs on a fake, so it scripts
// the commands it runs and skips wall-clock checks. The suite passes on the
// fake, on runtime.Client over this package's Server, and on runtime.Client
// against a real containerd 1.6 in nodekit's end-to-end tests.
//
// A case takes well under a second on the fake; on containerd the suite takes
// about as long as its containers take to start and stop (the stop-timeout
// case waits its 1s grace period).
package runtimetest
