package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proxy holds the fault state, the counters and the two reverse proxies.
type proxy struct {
	addr     string        // client-facing address, kept across refuse()
	incoming chan net.Conn // accepted connections for the HTTPS server

	mu          sync.Mutex
	ln          net.Listener // nil while refusing
	lnReady     *sync.Cond
	refuseTimer *time.Timer
	conns       map[*faultConn]struct{}
	stallCh     chan struct{} // non-nil while stalled; closed on unstall
	stallTimer  *time.Timer
	delay       time.Duration
	fail        failRule
	stats       stats

	asUser *httputil.ReverseProxy // front-proxy cert + X-Remote-* headers
	asIs   *httputil.ReverseProxy // no client cert: token or anonymous
}

// failRule answers the next Left requests whose path contains Match.
type failRule struct {
	Code       int    `json:"code"`
	Left       int    `json:"left"`
	RetryAfter int    `json:"retryAfterSeconds,omitempty"`
	Match      string `json:"match,omitempty"`
}

// stats is what GET /counts returns.
type stats struct {
	Total       int64            `json:"total"`       // requests received
	Connections int64            `json:"connections"` // TCP connections accepted
	Verbs       map[string]int64 `json:"verbs"`       // list, watch, get, create, update, patch, delete, ...
	Requests    map[string]int64 `json:"requests"`    // "VERB /path" (no query)
	Statuses    map[string]int64 `json:"statuses"`    // status codes from the apiserver
	Injected    map[string]int64 `json:"injected"`    // status codes written by the proxy
}

func newStats() stats {
	return stats{Verbs: map[string]int64{}, Requests: map[string]int64{},
		Statuses: map[string]int64{}, Injected: map[string]int64{}}
}

func newProxy(upstream string, cas *x509.CertPool, frontProxy tls.Certificate) *proxy {
	p := &proxy{incoming: make(chan net.Conn), conns: map[*faultConn]struct{}{}, stats: newStats()}
	p.lnReady = sync.NewCond(&p.mu)
	target := &url.URL{Scheme: "https", Host: upstream}
	mk := func(certs []tls.Certificate) *httputil.ReverseProxy {
		return &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
			Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: cas, Certificates: certs},
				ForceAttemptHTTP2:   true,
				MaxIdleConnsPerHost: 64,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			},
			FlushInterval:  -1, // stream watch events as they come
			ModifyResponse: p.countStatus,
			ErrorHandler:   p.upstreamError,
		}
	}
	p.asUser = mk([]tls.Certificate{frontProxy})
	p.asIs = mk(nil)
	return p
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	verb := classify(r)
	p.mu.Lock()
	p.stats.Total++
	p.stats.Verbs[verb]++
	p.stats.Requests[verb+" "+r.URL.Path]++
	inject := p.fail.Left > 0 && strings.Contains(r.URL.Path, p.fail.Match)
	rule := p.fail
	if inject {
		p.fail.Left--
		p.stats.Injected[strconv.Itoa(rule.Code)]++
	}
	p.mu.Unlock()
	if inject {
		writeStatus(w, rule.Code, rule.RetryAfter)
		return
	}

	// Never trust identity headers from the client.
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Remote-") {
			r.Header.Del(k)
		}
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		// Verified by the TLS handshake against the client CA.
		cert := r.TLS.PeerCertificates[0]
		r.Header.Set("X-Remote-User", cert.Subject.CommonName)
		for _, g := range cert.Subject.Organization {
			r.Header.Add("X-Remote-Group", g)
		}
		p.asUser.ServeHTTP(w, r)
		return
	}
	p.asIs.ServeHTTP(w, r)
}

// classify names a request the way apiserver audit logs do: watch, list or
// get for reads (by the shape of the path), else the lower-cased method.
func classify(r *http.Request) string {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	default:
		return strings.ToLower(r.Method)
	}
	q := r.URL.Query().Get("watch")
	if q == "true" || q == "1" {
		return "watch"
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		rest = segs[2:] // /api/v1/...
	case len(segs) >= 3 && segs[0] == "apis":
		rest = segs[3:] // /apis/GROUP/VERSION/...
	default:
		return "get" // /version, /readyz, discovery, ...
	}
	if len(rest) > 0 && rest[0] == "watch" {
		return "watch" // legacy /api/v1/watch/... paths
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:] // namespaced resource
	}
	if len(rest) == 1 {
		return "list"
	}
	return "get"
}

func (p *proxy) countStatus(resp *http.Response) error {
	p.mu.Lock()
	p.stats.Statuses[strconv.Itoa(resp.StatusCode)]++
	p.mu.Unlock()
	return nil
}

// upstreamError answers 502 with a Status when the apiserver is unreachable
// (e.g. during testenv/restart-apiserver).
func (p *proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away (or its connection was cut)
	}
	p.mu.Lock()
	p.stats.Statuses["502"]++
	p.mu.Unlock()
	writeJSON(w, http.StatusBadGateway, status(http.StatusBadGateway, "faultproxy: upstream: "+err.Error(), 0))
}

// writeStatus writes an injected error as the apiserver would: a
// metav1.Status body, plus Retry-After for 429.
func writeStatus(w http.ResponseWriter, code, retryAfter int) {
	if code == http.StatusTooManyRequests {
		if retryAfter <= 0 {
			retryAfter = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, code, status(code, fmt.Sprintf("faultproxy: injected %d", code), retryAfter))
}

func status(code int, msg string, retryAfter int) map[string]any {
	reasons := map[int]string{429: "TooManyRequests", 500: "InternalError", 502: "ServiceUnavailable", 503: "ServiceUnavailable", 504: "Timeout"}
	reason, ok := reasons[code]
	if !ok {
		reason = "Unknown"
	}
	s := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code}
	if retryAfter > 0 {
		s["details"] = map[string]any{"retryAfterSeconds": retryAfter}
	}
	return s
}
