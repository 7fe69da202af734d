// Package podsourcetest holds fakes for code that consumes pod sources: a
// Source whose full sets a test sends by hand (Send), to drive a
// podsource.Merger or anything that runs one, and Pod, a minimal valid pod.
//
// Source.Send blocks until the running Source hands the set on, so a test
// knows the set reached the merger's input when Send returns; the merged
// updates then arrive on Merger.Updates.
package podsourcetest
