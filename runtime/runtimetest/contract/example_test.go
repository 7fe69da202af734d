package contract_test

// The contract suite on the fake; a real runtime is checked the same way
// with its Client and its images (Fake left nil).
func Example() {
	// In a _test.go file:
	//
	//	func TestContract(t *testing.T) {
	//		contract.Run(t, func(t *testing.T) contract.Target {
	//			f := runtimetest.New(runtimetest.Options{})
	//			return contract.Target{Runtime: f, Fake: f,
	//				PauseImage: runtimetest.PauseImage, BusyboxImage: runtimetest.BusyboxImage}
	//		})
	//	}
}
