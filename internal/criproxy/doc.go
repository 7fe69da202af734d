// Package criproxy is a CRI proxy for fault tests: it listens on a unix
// socket, forwards every gRPC call unchanged to a real runtime's socket, and
// lets a test make chosen calls fail or hang (SetFault) and count the calls
// by method (Calls). It forwards raw messages, so it needs no knowledge of
// the CRI's types and passes streaming calls (GetContainerEvents) through
// as they are. Faults are decided per call, before anything is forwarded.
package criproxy
