package remote_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
)

// Dial fails at once when the socket is not there (or does not serve CRI
// v1); once connected, calls fail with Unavailable while the runtime is down
// and the client reconnects when it is back.
func ExampleDial() {
	_, err := remote.Dial(context.Background(), remote.Options{
		Endpoint:          "unix:///nonexistent/nodekit-example/cri.sock",
		ConnectionTimeout: 2 * time.Second,
	})
	fmt.Println("unavailable:", runtime.IsUnavailable(err))
	fmt.Println("not CRI v1:", errors.Is(err, remote.ErrNotCRIv1))
	// Output:
	// unavailable: true
	// not CRI v1: false
}

// A Conn dials in the background and serves calls meanwhile: before it has
// connected they fail with ErrNotConnected and the dial's error, so a node
// can register and report its runtime NotReady with the reason.
func ExampleConn() {
	conn, err := remote.NewConn(remote.ConnOptions{
		Options: remote.Options{Endpoint: "unix:///nonexistent/nodekit-example/cri.sock"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := klog.NewContext(context.Background(), logr.Discard()) // Run logs its attempts
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- conn.Run(ctx) }() // an agent runs it with its other parts

	_, err = conn.Version(ctx) // waits for the first dial
	fmt.Println("not connected:", errors.Is(err, remote.ErrNotConnected), "unavailable:", runtime.IsUnavailable(err))
	fmt.Println("ready:", conn.Err() == nil)
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// not connected: true unavailable: true
	// ready: false
	// Run: <nil>
}
