// Package contract is a test suite that checks a runtime.Runtime behaves like
// a CRI runtime. It imports package testing, so it lives apart from the fake
// in runtimetest, which binaries may embed.
//
// Run runs the same cases on any Runtime: lifecycles with states and times,
// list filters, ExecSync success, non-zero exit and timeout, a stop whose
// SIGTERM is ignored (on a real runtime it must take the grace period and end
// with exit code 137), removal of running things, idempotent stop and remove,
// NotFound for missing objects, UpdateRuntimeConfig, UpdateContainerResources
// and ReopenContainerLog, and the optional container events (the four events
// of a container's life, with its sandbox's status) and metrics (a
// skip where the runtime answers Unimplemented, as containerd 1.6 does).
// Target.Fake tells the suite it runs on a fake, so it scripts the commands
// it runs and skips wall-clock checks. The suite passes on the fake, on
// remote.Client over runtimetest's Server, and on remote.Client against
// real containerds in nodekit's end-to-end tests: 1.6 (where the events and
// metrics cases skip) and 2.4 (where every case runs; the end-to-end test
// fails if one skips).
//
// A case takes well under a second on the fake; on containerd the suite takes
// about as long as its containers take to start and stop (the stop-timeout
// case waits its 1s grace period).
package contract
