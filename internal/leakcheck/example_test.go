package leakcheck_test

import (
	"fmt"
	"time"

	"github.com/nodekit/nodekit/internal/leakcheck"
)

// printTB prints what a check reports (a *testing.T in a real test).
type printTB struct{}

func (printTB) Helper() {}
func (printTB) Errorf(format string, args ...any) {
	fmt.Println(fmt.Sprintf(format, args...)[:len("leakcheck: 1 goroutine(s) still running")])
}

func ExampleSnapshot_Verify() {
	s := leakcheck.Take()
	stop := make(chan struct{})
	go func() { <-stop }() // still running at the check: a leak
	s.VerifyWithin(printTB{}, 10*time.Millisecond)

	close(stop) // now it ends, and the same check passes
	s.Verify(printTB{})
	fmt.Println("done")
	// Output:
	// leakcheck: 1 goroutine(s) still running
	// done
}
