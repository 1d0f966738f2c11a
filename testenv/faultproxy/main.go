// Command faultproxy is a loopback-only HTTPS proxy in front of a test
// kube-apiserver that can inject faults on demand: cut connections, stall
// them, delay bytes, refuse new connections, and answer requests with 429 or
// 500. It also counts requests by verb and path so tests can assert "no
// relist" or "no hot loop".
//
// # Why it terminates TLS
//
// A raw TCP proxy cannot write an HTTP 429, nor see paths to count them. So
// the proxy terminates TLS with a serving certificate signed by the testenv
// CA (the kubeconfigs' certificate-authority-data stays valid) and opens its
// own TLS connections to the apiserver. Authentication keeps its real
// meaning this way:
//
//   - a client certificate (signed by the testenv client CA) is verified here
//     and forwarded as X-Remote-User / X-Remote-Group headers over a
//     connection that presents the front-proxy client certificate, which
//     kube-apiserver trusts through --requestheader-client-ca-file (this is
//     how the kube-aggregator front proxy works);
//   - anything else (bearer token, anonymous) goes upstream over a connection
//     without a client certificate, Authorization header untouched.
//
// Incoming X-Remote-* headers are always dropped so no one can spoof them.
// Both HTTP/1.1 and HTTP/2 are served and used upstream; watch streams are
// flushed as they arrive.
//
// Faults act on the client-facing TCP connections, below TLS: a stalled
// connection moves no byte in either direction; a cut connection is closed
// (optionally with a TCP reset); refusing closes the listening socket so new
// connections get ECONNREFUSED, then listens again on the same port.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "proxy address (loopback only)")
	control := flag.String("control", "127.0.0.1:0", "control API address (loopback only, plain HTTP)")
	upstream := flag.String("upstream", "", "kube-apiserver host:port (loopback only)")
	certFile := flag.String("cert", "", "serving certificate (PEM)")
	keyFile := flag.String("key", "", "serving key (PEM)")
	caFile := flag.String("ca", "", "CA that signed the apiserver's serving certificate")
	clientCAFile := flag.String("client-ca", "", "CA that signs client certificates")
	fpCertFile := flag.String("front-proxy-cert", "", "front-proxy client certificate presented upstream")
	fpKeyFile := flag.String("front-proxy-key", "", "front-proxy client key")
	addrFile := flag.String("addr-file", "", "write the bound addresses here as shell assignments once listening")
	flag.Parse()

	for _, a := range []string{*listen, *control, *upstream} {
		if err := checkLoopback(a); err != nil {
			log.Fatalf("faultproxy: %v", err)
		}
	}
	serving := must(tls.LoadX509KeyPair(*certFile, *keyFile))
	frontProxy := must(tls.LoadX509KeyPair(*fpCertFile, *fpKeyFile))
	upstreamCAs := must(loadPool(*caFile))
	clientCAs := must(loadPool(*clientCAFile))

	p := newProxy(*upstream, upstreamCAs, frontProxy)
	if err := p.listen(*listen); err != nil {
		log.Fatalf("faultproxy: %v", err)
	}
	ctl := must(net.Listen("tcp", *control))

	if *addrFile != "" {
		s := fmt.Sprintf("FAULTPROXY_ADDR=%s\nFAULTPROXY_CONTROL=%s\n", p.addr, ctl.Addr())
		if err := os.WriteFile(*addrFile, []byte(s), 0o644); err != nil {
			log.Fatalf("faultproxy: %v", err)
		}
	}
	log.Printf("faultproxy: proxy https://%s -> https://%s, control http://%s", p.addr, *upstream, ctl.Addr())

	go func() { log.Fatal(http.Serve(ctl, p.controlHandler())) }()
	srv := &http.Server{
		Handler: p,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serving},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    clientCAs,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ErrorLog: log.New(os.Stderr, "faultproxy: http: ", 0),
	}
	log.Fatal(srv.ServeTLS(p, "", ""))
}

// checkLoopback refuses any address that is not on the loopback range.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", addr)
	}
	return nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", file)
	}
	return pool, nil
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatalf("faultproxy: %v", err)
	}
	return v
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
