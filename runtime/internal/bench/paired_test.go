package bench

import (
	"context"
	"testing"
	"time"
)

// The paired benchmarks run both clients in the same loop, alternating which
// goes first, each against its own copy of the fake server, and time each
// call. On a machine shared with other work, load changes from second to
// second; pairing gives both clients the same load, so the ratio
// (nodekit-ns/op over cri-client-ns/op) is steady where the plain benchmarks'
// ns/op is not.
func paired(b *testing.B, run func(o ops, ctx context.Context, id string) error) {
	epA, idA := server(b)
	epB, idB := server(b)
	a, c := nodekitOps(b, epA), criClientOps(b, epB)
	ctx := context.Background()
	var ta, tc time.Duration
	i := 0
	for b.Loop() {
		first, second := a, c
		firstID, secondID := idA, idB
		tFirst, tSecond := &ta, &tc
		if i%2 == 1 {
			first, second, firstID, secondID, tFirst, tSecond = c, a, idB, idA, &tc, &ta
		}
		i++
		t0 := time.Now()
		if err := run(first, ctx, firstID); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := run(second, ctx, secondID); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		*tFirst += t1.Sub(t0)
		*tSecond += t2.Sub(t1)
	}
	b.ReportMetric(float64(ta.Nanoseconds())/float64(i), "nodekit-ns/op")
	b.ReportMetric(float64(tc.Nanoseconds())/float64(i), "cri-client-ns/op")
	b.ReportMetric(float64(ta)/float64(tc), "nodekit/cri-client")
}

func BenchmarkPairedListContainers100(b *testing.B) {
	paired(b, func(o ops, ctx context.Context, _ string) error { _, err := o.list(ctx); return err })
}

func BenchmarkPairedContainerStatus(b *testing.B) {
	paired(b, func(o ops, ctx context.Context, id string) error { return o.status(ctx, id) })
}

func BenchmarkPairedExecSync(b *testing.B) {
	paired(b, func(o ops, ctx context.Context, id string) error { return o.exec(ctx, id) })
}
