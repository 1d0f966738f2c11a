// Workqueue benchmark, client-go side: the twin of bench_workqueue.c (see
// there for the exact scenarios). Prints "<scenario> <ops/s>" lines.
package main

import (
	"fmt"
	"os"
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
)

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

func cycle(producers, workers int) float64 {
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
	return float64(producers*rounds*2*keys) / secs
}

func addAfter() float64 {
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
		q.AddAfter(names[i], time.Duration((seed>>8)%2000)*time.Microsecond)
	}
	for processed.Load() < delayedKeys {
		time.Sleep(100 * time.Microsecond)
	}
	secs := time.Since(t0).Seconds()
	q.ShutDown()
	ww.Wait()
	return delayedKeys / secs
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
			fmt.Printf("%s %.0f\n", c.name, cycle(c.p, c.w))
		}
	}
	if wanted("add_after") {
		fmt.Printf("add_after %.0f\n", addAfter())
	}
}
