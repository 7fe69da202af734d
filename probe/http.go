package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// maxRedirects bounds a redirect chain as kubelet (and Go's default client)
// does: at most 10 requests in all, so the 10th redirect is refused.
const maxRedirects = 10

var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)

// HTTPGet sends action's GET request and judges the response as kubelet
// does: 200–399 is Success, anything else Failure. The host is action.Host or
// else target.PodIP; a Host header sets the request's Host. Unless set, it
// sends "User-Agent: kube-probe/<version>" and "Accept: */*" (an Accept
// header with an empty value sends none). Redirects to the same host are
// followed, 10 requests in all at most (more is a Failure); a redirect to
// another host is not followed and is a Success with Warning. At most
// MaxOutputBytes of the body are read into the message, and response
// headers larger than MaxResponseHeaderBytes fail the probe. No connection is
// reused between probes.
func (h *Handlers) HTTPGet(ctx context.Context, action *corev1.HTTPGetAction, target Target, timeout time.Duration) Outcome {
	req, err := h.newHTTPRequest(ctx, action, target)
	if err != nil {
		return Outcome{Result: Unknown, Message: truncate(err.Error()), Err: err}
	}
	client := http.Client{
		Timeout:       timeout,
		Transport:     h.transport,
		CheckRedirect: sameHostRedirects,
	}
	resp, err := client.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "server response headers exceeded") {
			return Outcome{Result: Failure, Message: fmt.Sprintf("HTTP probe failed: the response headers exceed %d bytes", MaxResponseHeaderBytes)}
		}
		return Outcome{Result: Failure, Message: truncate(err.Error())}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxOutputBytes))
	if err != nil {
		return Outcome{Result: Failure, Message: truncate(fmt.Sprintf("reading the response body: %v", err)), StatusCode: resp.StatusCode}
	}
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Outcome{Result: Success, Message: text, StatusCode: resp.StatusCode}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return Outcome{Result: Success, Warning: true, Message: truncate("Probe terminated redirects, Response body: " + text), StatusCode: resp.StatusCode}
	default:
		return Outcome{Result: Failure, Message: fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), StatusCode: resp.StatusCode}
	}
}

func (h *Handlers) newHTTPRequest(ctx context.Context, action *corev1.HTTPGetAction, target Target) (*http.Request, error) {
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := action.Host
	if host == "" {
		host = target.PodIP
	}
	port, err := resolvePort(action.Port, target.Container)
	if err != nil {
		return nil, fmt.Errorf("http probe: %w", err)
	}
	u, err := url.Parse(action.Path)
	if err != nil {
		u = &url.URL{Path: action.Path}
	}
	u.Scheme = scheme
	u.Host = hostPort(host, port)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("http probe: %w", err)
	}
	hdr := make(http.Header, len(action.HTTPHeaders)+2)
	for _, kv := range action.HTTPHeaders {
		hdr.Add(kv.Name, kv.Value)
	}
	if _, ok := hdr["User-Agent"]; !ok {
		hdr.Set("User-Agent", h.userAgent)
	}
	if _, ok := hdr["Accept"]; !ok {
		hdr.Set("Accept", "*/*")
	} else if hdr.Get("Accept") == "" {
		hdr.Del("Accept")
	}
	req.Header = hdr
	req.Host = hdr.Get("Host")
	return req, nil
}

// sameHostRedirects follows redirects to the first request's host, at most
// maxRedirects of them, and stops (keeping the redirect as the response) at
// one to another host.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errTooManyRedirects
	}
	return nil
}
