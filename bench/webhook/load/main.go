// Load generator for bench/webhook: C concurrent clients, each with its own
// kept-alive HTTP/1.1 TLS connection, POST AdmissionReview bodies for D
// seconds, alternating /mutate (a Foo without replicas) and /validate (a Foo
// with 3). Only answers that are 200 with the request's uid and the expected
// decision count (a mutate must carry the expected patch, a validate none);
// anything else is a failure.
//
// The client is kept lean so that its own CPU time, which on a small
// machine shares the cores with the server measured, weighs little: it
// writes each request and reads each answer itself over crypto/tls (one
// goroutine per connection; net/http's client hands every request between
// three), and checks an answer by its bytes (status line, Content-Length or
// chunked body, the uid, allowed, the patch) instead of decoding it with
// encoding/json. A broken connection counts its request failed and is
// dialled again.
//
//	load URL CA_FILE CONCURRENCY SECONDS [REQUESTS]
//
// With REQUESTS, the clients stop after that many requests in all (split
// evenly, each client alternating from /mutate), or at SECONDS if that comes
// first, and rps is over the time they took: a fixed amount of work, for
// counting instructions (./instructions).
//
// Prints "ok= failed= rps= p50_ms= p99_ms=".
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// review appends an AdmissionReview for a Foo with uid and the spec tail
// (spec) to b.
func review(b []byte, uid string, spec string) []byte {
	b = append(b, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`...)
	b = append(b, uid...)
	b = append(b, `","kind":{"group":"samplecontroller.k8s.io","version":"v1alpha1","kind":"Foo"},`+
		`"resource":{"group":"samplecontroller.k8s.io","version":"v1alpha1","resource":"foos"},`+
		`"name":"example-foo","namespace":"default","operation":"CREATE",`+
		`"userInfo":{"username":"system:admin","groups":["system:masters","system:authenticated"]},`+
		`"object":{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"example-foo",`+
		`"namespace":"default","labels":{"app":"bench"},"annotations":{"note":"a webhook benchmark object"}},`+
		`"spec":{"deploymentName":"example-foo"`...)
	b = append(b, spec...)
	return append(b, `}},"oldObject":null,"dryRun":false,`+
		`"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}}`...)
}

// The patch both servers answer a Foo without replicas with:
// [{"op":"add","path":"/spec/replicas","value":1}] in base64.
const wantPatch = `"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvcmVwbGljYXMiLCJ2YWx1ZSI6MX1d"`

// conn is one client's kept-alive connection.
type conn struct {
	host string
	cfg  *tls.Config
	tc   *tls.Conn
	r    *bufio.Reader
	req  []byte // the request being written, reused
	body []byte // the answer's body, reused
}

func (c *conn) close() {
	if c.tc != nil {
		c.tc.Close()
		c.tc = nil
	}
}

// readAnswer reads one HTTP/1.1 answer: its status and body.
func (c *conn) readAnswer() (int, []byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, err
	}
	length, chunked := -1, false
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		colon := bytes.IndexByte(h, ':')
		if colon < 0 {
			return 0, nil, fmt.Errorf("bad header %q", h)
		}
		name, value := h[:colon], bytes.TrimSpace(h[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, err
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		}
	}
	c.body = c.body[:0]
	switch {
	case chunked:
		for {
			l, err := c.r.ReadSlice('\n')
			if err != nil {
				return 0, nil, err
			}
			n, err := strconv.ParseInt(string(bytes.TrimRight(l, "\r\n")), 16, 32)
			if err != nil {
				return 0, nil, err
			}
			if n == 0 {
				if _, err := c.r.Discard(2); err != nil {
					return 0, nil, err
				}
				return status, c.body, nil
			}
			c.body, err = readN(c.r, c.body, int(n)+2)
			if err != nil {
				return 0, nil, err
			}
			c.body = c.body[:len(c.body)-2]
		}
	case length >= 0:
		c.body, err = readN(c.r, c.body, length)
		return status, c.body, err
	}
	return 0, nil, errors.New("answer without Content-Length or chunked body")
}

// readN appends exactly n bytes from r to b.
func readN(r *bufio.Reader, b []byte, n int) ([]byte, error) {
	start := len(b)
	for cap(b)-start < n {
		b = append(b[:cap(b)], 0)
	}
	b = b[:start+n]
	_, err := io.ReadFull(r, b[start:])
	return b, err
}

// post sends one review and reads its answer, dialling first if needed.
func (c *conn) post(path string, review []byte) (int, []byte, error) {
	if c.tc == nil {
		tc, err := tls.Dial("tcp", c.host, c.cfg)
		if err != nil {
			return 0, nil, err
		}
		c.tc, c.r = tc, bufio.NewReaderSize(tc, 16384)
	}
	c.req = append(c.req[:0], "POST "...)
	c.req = append(c.req, path...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.host...)
	c.req = append(c.req, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	c.req = strconv.AppendInt(c.req, int64(len(review)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, review...)
	if _, err := c.tc.Write(c.req); err != nil {
		c.close()
		return 0, nil, err
	}
	status, body, err := c.readAnswer()
	if err != nil {
		c.close()
	}
	return status, body, err
}

// good says whether body is the right answer to the review with uid.
func good(body []byte, uid string, mutate bool) bool {
	var want [64]byte
	w := append(append(append(want[:0], `"uid":"`...), uid...), '"')
	if !bytes.Contains(body, w) || !bytes.Contains(body, []byte(`"allowed":true`)) {
		return false
	}
	if mutate {
		return bytes.Contains(body, []byte(wantPatch))
	}
	return !bytes.Contains(body, []byte(`"patch"`))
}

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: load URL CA_FILE CONCURRENCY SECONDS [REQUESTS]")
		os.Exit(2)
	}
	u, err := url.Parse(os.Args[1])
	if err != nil || u.Scheme != "https" || u.Host == "" {
		fmt.Fprintln(os.Stderr, "load: URL must be https://HOST:PORT")
		os.Exit(2)
	}
	ca, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}
	conc, _ := strconv.Atoi(os.Args[3])
	secs, _ := strconv.Atoi(os.Args[4])
	requests := 0
	if len(os.Args) == 6 {
		requests, _ = strconv.Atoi(os.Args[5])
	}
	start := time.Now()
	deadline := start.Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	var lat []time.Duration
	ok, failed := 0, 0
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := &conn{host: u.Host, cfg: cfg}
			defer c.close()
			var mine []time.Duration
			var rev []byte
			nGood, nBad := 0, 0
			quota := -1 // no limit but the deadline
			if requests > 0 {
				quota = requests / conc
				if w < requests%conc {
					quota++
				}
			}
			for i := 0; i != quota && time.Now().Before(deadline); i++ {
				uid := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				mutate := i%2 == 0
				path, spec := "/validate", `,"replicas":3`
				if mutate {
					path, spec = "/mutate", ""
				}
				rev = review(rev[:0], uid, spec)
				t0 := time.Now()
				status, body, err := c.post(path, rev)
				d := time.Since(t0)
				if err != nil || status != 200 || !good(body, uid, mutate) {
					nBad++
					continue
				}
				nGood++
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			ok += nGood
			failed += nBad
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := float64(secs)
	if requests > 0 {
		elapsed = time.Since(start).Seconds()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	fmt.Printf("ok=%d failed=%d rps=%.0f p50_ms=%.3f p99_ms=%.3f\n", ok, failed,
		float64(ok)/elapsed, pct(0.50), pct(0.99))
}
