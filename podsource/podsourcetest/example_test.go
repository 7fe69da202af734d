package podsourcetest_test

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/podsource/podsourcetest"
)

// A test drives a merger (or the code under test that runs one) with a
// fake source whose sets it sends by hand.
func ExampleSource() {
	src := podsourcetest.NewSource(podsource.APISource)
	merger, err := podsource.NewMerger(podsource.MergerOptions{Sources: []podsource.PodSource{src}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- merger.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if err := src.Send(ctx, podsourcetest.Pod("a", "node-1", "uid-a")); err != nil {
		panic(err)
	}
	u := <-merger.Updates()
	fmt.Println(u.Op, u.Source, u.Pods[0].Name)
	if err := src.Send(ctx); err != nil {
		panic(err)
	}
	u = <-merger.Updates()
	fmt.Println(u.Op, u.Source, u.Pods[0].Name)
	// Output:
	// ADD api a
	// REMOVE api a
}
