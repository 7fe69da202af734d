package nodeapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"k8s.io/klog/v2"
)

// maxErrorBody bounds the body of a runtime's refusal passed on to the
// client.
const maxErrorBody = 64 << 10

// proxyUpgrade passes r, a request to upgrade the connection (SPDY or
// WebSocket), on to target, the runtime's streaming URL, and then copies
// bytes both ways until either side closes or r's context ends: what
// kubelet does with apimachinery's UpgradeAwareHandler, without its
// dependencies. A runtime that refuses the upgrade has its answer passed
// on (at most maxErrorBody of its body).
func proxyUpgrade(w http.ResponseWriter, r *http.Request, target *url.URL) {
	ctx := r.Context()
	logger := klog.FromContext(ctx)
	backend, err := dialStream(ctx, target)
	if err != nil {
		http.Error(w, fmt.Sprintf("error dialing the runtime's streaming server: %v", err), http.StatusInternalServerError)
		return
	}
	// Closing the runtime's connection ends a handshake or a session
	// when the request's context ends (the server shutting down).
	stop := context.AfterFunc(ctx, func() { _ = backend.Close() })
	defer stop()
	defer backend.Close()

	out := &http.Request{
		Method:     r.Method,
		URL:        &url.URL{Path: target.Path, RawPath: target.RawPath, RawQuery: target.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     r.Header.Clone(),
		Host:       target.Host,
	}
	if err := out.Write(backend); err != nil {
		http.Error(w, fmt.Sprintf("error sending to the runtime's streaming server: %v", err), http.StatusInternalServerError)
		return
	}
	// Keep every byte read from the runtime: the handshake's answer, and
	// what the runtime may have sent after it, go to the client as read.
	var raw bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(backend, &raw)), out)
	if err != nil {
		http.Error(w, fmt.Sprintf("error reading the runtime's streaming server's answer: %v", err), http.StatusInternalServerError)
		return
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode < 400 {
			http.Error(w, fmt.Sprintf("invalid upgrade response: status code %d", resp.StatusCode), http.StatusInternalServerError)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, maxErrorBody))
		return
	}

	client, cbuf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, fmt.Sprintf("error hijacking the connection: %v", err), http.StatusInternalServerError)
		return
	}
	defer client.Close()
	if _, err := client.Write(raw.Bytes()); err != nil {
		return
	}
	// Bytes the client sent after its request and the server buffered.
	if n := cbuf.Reader.Buffered(); n > 0 {
		b, _ := cbuf.Reader.Peek(n)
		if _, err := backend.Write(b); err != nil {
			return
		}
	}
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(backend, client)
		done <- err
	}()
	go func() {
		_, err := io.Copy(client, backend)
		done <- err
	}()
	// When one side ends the session ends: close both, so the other
	// copy ends too, and wait for it.
	err = <-done
	_ = client.Close()
	_ = backend.Close()
	<-done
	if err != nil {
		logger.V(4).Info("Stream ended with an error", "path", r.URL.Path, "err", err)
	}
}

// dialStream connects to the host of a streaming URL, over TLS for https.
func dialStream(ctx context.Context, u *url.URL) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	switch u.Scheme {
	case "http":
		return (&net.Dialer{}).DialContext(ctx, "tcp", host)
	case "https":
		return (&tls.Dialer{Config: &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}}).DialContext(ctx, "tcp", host)
	}
	return nil, fmt.Errorf("streaming URL %q: want http or https", u.Redacted())
}
