package criproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Fault decides what happens to the n-th call (1-based) of a method: nil
// forwards it, an error fails it with that error without forwarding. It may
// block until ctx ends to make the call hang.
type Fault func(ctx context.Context, n int) error

// Proxy forwards CRI calls from Endpoint to a backend socket.
type Proxy struct {
	// Endpoint is the proxy's CRI endpoint, "unix://" + its socket path.
	Endpoint string

	lis     net.Listener
	srv     *grpc.Server
	backend *grpc.ClientConn

	mu     sync.Mutex
	faults map[string]Fault
	calls  map[string]int
}

// Start listens on socket and forwards to the unix socket backend.
func Start(socket, backend string) (*Proxy, error) {
	_ = os.Remove(socket)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("criproxy: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+backend,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("criproxy: backend %s: %w", backend, err)
	}
	p := &Proxy{Endpoint: "unix://" + socket, lis: lis, backend: conn,
		faults: map[string]Fault{}, calls: map[string]int{}}
	p.srv = grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(p.forward))
	go func() { _ = p.srv.Serve(lis) }()
	return p, nil
}

// SetFault sets the fault of a full method name such as
// "/runtime.v1.RuntimeService/RunPodSandbox"; nil removes it.
func (p *Proxy) SetFault(method string, f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f == nil {
		delete(p.faults, method)
		return
	}
	p.faults[method] = f
}

// Calls returns how many calls of method arrived (failed ones included).
func (p *Proxy) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// Stop stops serving, ending calls in flight, and closes the backend.
func (p *Proxy) Stop() {
	p.srv.Stop()
	_ = p.backend.Close()
}

func (p *Proxy) forward(_ any, in grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(in)
	if !ok {
		return status.Error(codes.Internal, "criproxy: no method")
	}
	p.mu.Lock()
	p.calls[method]++
	n := p.calls[method]
	f := p.faults[method]
	p.mu.Unlock()
	ctx := in.Context()
	if f != nil {
		if err := f(ctx, n); err != nil {
			return err
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	defer cancel()
	out, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	// Client to backend.
	errc := make(chan error, 1)
	go func() {
		for {
			var m rawMessage
			if err := in.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					errc <- out.CloseSend()
				} else {
					errc <- err
				}
				return
			}
			if err := out.SendMsg(&m); err != nil {
				errc <- err
				return
			}
		}
	}()
	// Backend to client.
	if h, err := out.Header(); err == nil {
		_ = in.SendHeader(h)
	}
	for {
		var m rawMessage
		if err := out.RecvMsg(&m); err != nil {
			in.SetTrailer(out.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := in.SendMsg(&m); err != nil {
			return err
		}
	}
}

// rawMessage is a message's bytes, passed through unparsed.
type rawMessage struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*rawMessage)
	if !ok {
		return nil, fmt.Errorf("criproxy: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("criproxy: cannot unmarshal into %T", v)
	}
	m.b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
