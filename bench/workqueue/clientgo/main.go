// Workqueue benchmark, client-go side: the twin of bench_workqueue.c (see
// there for the exact scenarios). Prints "<scenario> <ops/s> <adds>
// <delivered>" lines: adds offered, keys handed to workers. priority.go
// runs the priority scenario on controller-runtime's priority queue.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
)

const (
	keys         = 10000
	rounds       = 50
	delayedKeys  = 100000
	delayWorkers = 2
	drainWorkNs  = 5000 // KCR_WQ_WORK_NS overrides, as in bench_workqueue.c
)

// outcome is what one scenario measured.
type outcome struct {
	opsPerSec float64 // seconds for the drain scenarios
	adds      int64   // adds offered
	delivered int64   // keys handed to workers
	addsSecs  float64 // drain: seconds from the first add until the last one returned
}

var names []string

type getDoner interface {
	Get() (string, bool)
	Done(string)
}

func worker(q getDoner, processed *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		q.Done(key)
		processed.Add(1)
	}
}

func producer(q *workqueue.Typed[string], wg *sync.WaitGroup) {
	defer wg.Done()
	for round := 0; round < rounds; round++ {
		for i := 0; i < keys; i++ {
			q.Add(names[i])
			if i > 0 {
				q.Add(names[i-1])
			}
		}
		q.Add(names[keys-1])
	}
}

func cycle(producers, workers int) outcome {
	q := workqueue.NewTyped[string]()
	var processed atomic.Int64
	var pw, ww sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < workers; i++ {
		ww.Add(1)
		go worker(q, &processed, &ww)
	}
	for i := 0; i < producers; i++ {
		pw.Add(1)
		go producer(q, &pw)
	}
	pw.Wait()
	q.ShutDown() // workers drain what is queued, then stop
	ww.Wait()
	secs := time.Since(t0).Seconds()
	adds := int64(producers * rounds * 2 * keys)
	return outcome{float64(adds) / secs, adds, processed.Load(), 0}
}

func addAfter() outcome {
	q := workqueue.NewTypedDelayingQueue[string]()
	var processed atomic.Int64
	var ww sync.WaitGroup
	seed := uint32(12345)
	t0 := time.Now()
	for i := 0; i < delayWorkers; i++ {
		ww.Add(1)
		go worker(q, &processed, &ww)
	}
	for i := 0; i < delayedKeys; i++ {
		seed = seed*1664525 + 1013904223
		q.AddAfter(names[i], time.Duration((seed>>8)%3)*time.Millisecond)
	}
	for processed.Load() < delayedKeys {
		time.Sleep(100 * time.Microsecond)
	}
	secs := time.Since(t0).Seconds()
	q.ShutDown()
	ww.Wait()
	return outcome{delayedKeys / secs, delayedKeys, processed.Load(), 0}
}

func report(name string, o outcome) {
	if strings.HasPrefix(name, "drain_") { // seconds, not ops/s
		fmt.Printf("%s %.6f %d %d %.6f\n", name, o.opsPerSec, o.adds, o.delivered, o.addsSecs)
		return
	}
	fmt.Printf("%s %.0f %d %d\n", name, o.opsPerSec, o.adds, o.delivered)
}

func wanted(name string) bool {
	if len(os.Args) < 2 {
		return true
	}
	for _, a := range os.Args[1:] {
		if a == name {
			return true
		}
	}
	return false
}

func main() {
	names = make([]string, delayedKeys)
	for i := range names {
		names[i] = fmt.Sprintf("k%d", i)
	}
	cycles := []struct {
		name string
		p, w int
	}{{"cycle_1p1w", 1, 1}, {"cycle_1p4w", 1, 4}, {"cycle_4p4w", 4, 4}}
	for _, c := range cycles {
		if wanted(c.name) {
			report(c.name, cycle(c.p, c.w))
		}
	}
	if wanted("add_after") {
		report("add_after", addAfter())
	}
	if wanted("priority_1p2w") {
		report("priority_1p2w", priorityQueue())
	}
	workNs := int64(drainWorkNs)
	if v := os.Getenv("KCR_WQ_WORK_NS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench_workqueue_clientgo: KCR_WQ_WORK_NS=%q: %v\n", v, err)
			os.Exit(1)
		}
		workNs = n
	}
	for _, s := range [][2]int{{1, 1}, {1, 4}, {4, 1}, {4, 4}} {
		if name := fmt.Sprintf("drain_%dp%dw", s[0], s[1]); wanted(name) {
			report(name, drain(s[0], s[1], workNs))
		}
		if name := fmt.Sprintf("throughput_%dp%dw", s[0], s[1]); wanted(name) {
			report(name, throughput(s[0], s[1]))
		}
	}
}
