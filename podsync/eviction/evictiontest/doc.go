// Package evictiontest has fakes for podsync/eviction: an Observer whose
// snapshot a test sets, a Killer that records evictions, and a Reclaimer
// that records calls and runs a hook (to make a reclaim free something in
// the Observer's snapshot).
//
// The fakes are safe for concurrent use and never import package testing,
// so a simulated node agent can embed them.
package evictiontest
