// Package bench compares the runtime package's CRI client with
// k8s.io/cri-client's remote runtime service on the same fake CRI server. It
// is a module of its own so that the library does not depend on cri-client.
//
//	cd runtime/internal/bench
//	go test -run x -bench . -benchmem -count=6 -benchtime=0.3s | tee new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /client new.txt
//
// The Paired benchmarks call both clients in one loop and report the ratio
// of their times, which stays steady on a machine shared with other work:
//
//	go test -run x -bench Paired -count=10 -benchtime=0.5s > paired.txt
//	go run golang.org/x/perf/cmd/benchstat@latest paired.txt
package bench
