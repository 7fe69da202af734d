// Package leakcheck fails a test that leaves goroutines behind.
//
// Check takes a snapshot of the goroutines running now and returns a
// function that, run at the end of the test (defer or t.Cleanup), waits until
// every goroutine started since has ended, and reports the stacks of those
// that have not when the wait runs out. Main does the same around a whole
// test binary, for TestMain.
//
//	func TestRun(t *testing.T) {
//		defer leakcheck.Check(t)()
//		...
//	}
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
//
// Ignored: goroutines that were running at the snapshot (a package's
// control plane or containerd harness started in TestMain, say), the
// goroutine doing the check, the test runner's own goroutines (a parent test
// waiting for its subtests, tests waiting in t.Parallel) and the runtime's
// signal-handling goroutines.
//
// Timing: the check polls, doubling its pause from 1µs to 10ms, for up to
// Timeout (5s), since goroutines told to stop usually end a moment after the
// test's last line. Goroutines are told apart by their IDs, which the Go
// runtime never reuses within a process.
//
// Limits: a goroutine started since the snapshot by code outside the test
// (a timer in a shared library, say) counts as a leak. It reads the stacks
// with runtime.Stack, which stops the world for a moment.
package leakcheck
