// Load generator for bench/webhook: C concurrent clients, each with its own
// kept-alive HTTP/1.1 TLS connection, POST AdmissionReview bodies for D
// seconds, alternating /mutate (a Foo without replicas) and /validate (a Foo
// with 3). Only answers that are 200 with the request's uid and the expected
// decision count (a mutate must carry a patch); anything else is a failure.
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
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

func review(uid string, spec string) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid +
		`","kind":{"group":"samplecontroller.k8s.io","version":"v1alpha1","kind":"Foo"},` +
		`"resource":{"group":"samplecontroller.k8s.io","version":"v1alpha1","resource":"foos"},` +
		`"name":"example-foo","namespace":"default","operation":"CREATE",` +
		`"userInfo":{"username":"system:admin","groups":["system:masters","system:authenticated"]},` +
		`"object":{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"example-foo",` +
		`"namespace":"default","labels":{"app":"bench"},"annotations":{"note":"a webhook benchmark object"}},` +
		`"spec":{"deploymentName":"example-foo"` + spec + `}},"oldObject":null,"dryRun":false,` +
		`"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}}`)
}

type answer struct {
	Response struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
		Patch   []byte `json:"patch"`
	} `json:"response"`
}

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: load URL CA_FILE CONCURRENCY SECONDS [REQUESTS]")
		os.Exit(2)
	}
	base := os.Args[1]
	ca, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
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
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}},
				MaxIdleConnsPerHost: 1, ForceAttemptHTTP2: false}}
			var mine []time.Duration
			good, bad := 0, 0
			quota := -1 // no limit but the deadline
			if requests > 0 {
				quota = requests / conc
				if w < requests%conc {
					quota++
				}
			}
			for i := 0; i != quota && time.Now().Before(deadline); i++ {
				uid := fmt.Sprintf("%d-%d", w, i)
				path, spec := "/validate", `,"replicas":3`
				if i%2 == 0 {
					path, spec = "/mutate", ""
				}
				t0 := time.Now()
				resp, err := client.Post(base+path, "application/json", bytes.NewReader(review(uid, spec)))
				if err != nil {
					bad++
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				d := time.Since(t0)
				var a answer
				if resp.StatusCode != 200 || json.Unmarshal(body, &a) != nil || a.Response.UID != uid ||
					!a.Response.Allowed || (path == "/mutate") != (len(a.Response.Patch) > 0) {
					bad++
					continue
				}
				good++
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			ok += good
			failed += bad
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
