// The work a queue delivers, client-go side: the twin of delivered.c (see
// there for the scenarios), step by step the same. drain_PpWw reports
// seconds from the first add until every key's last add was processed and
// the queue was empty, with the reconciles run; throughput_PpWw gets per
// second while the queue always holds distinct keys.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
)

const (
	drainKeys  = 10000
	drainAdds  = 1000000
	tpBacklog  = 1024
	tpCheck    = 64
	tpWarmup   = 50 * time.Millisecond
	tpWindow   = 500 * time.Millisecond
	maxThreads = 4
)

// busy is delivered.c's busy(): a dependent multiply-add chain.
func busy(x uint64, iters int) uint64 {
	for i := 0; i < iters; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

var busySeed uint64 = 1

// calibrate returns the iterations of busy that take workNs: the fastest
// of 30 timed runs of 100,000.
func calibrate(workNs int64) int {
	const trials, iters = 30, 100000
	best := time.Hour
	x := busySeed
	for t := 0; t < trials; t++ {
		t0 := time.Now()
		x = busy(x, iters)
		if dt := time.Since(t0); dt < best {
			best = dt
		}
	}
	busySeed = x
	perIter := float64(best.Nanoseconds()) / iters
	n := int(float64(workNs)/perIter + 0.5)
	fmt.Fprintf(os.Stderr, "bench_workqueue_clientgo: busy work %d ns = %d iterations (%.3f ns each)\n",
		workNs, n, perIter)
	return n
}

// keyIndex is the index of "k<digits>".
func keyIndex(key string) int {
	i := 0
	for _, c := range key[1:] {
		i = i*10 + int(c-'0')
	}
	return i
}

// padded is a counter on its own cache line.
type padded struct {
	n atomic.Int64
	_ [56]byte
}

func drain(producers, workers int, workNs int64) outcome {
	q := workqueue.NewTyped[string]()
	iters := calibrate(workNs)
	// offered[p][k]: adds of key k producer p has made or is about to make
	// (written by p only with plain stores, like delivered.c's relaxed
	// ones; read by workers after Get, which the queue's lock orders).
	offered := make([][]int32, producers)
	for p := range offered {
		offered[p] = make([]int32, drainKeys)
	}
	covered := make([]bool, drainKeys)
	var remaining atomic.Int64
	remaining.Store(drainKeys)
	allCovered := make(chan struct{})
	var reconciles, lastNs, addedNs, sink [maxThreads]padded
	expected := int32(drainAdds / drainKeys)
	base := time.Now() // lastNs counts from here
	var pw, ww sync.WaitGroup
	for w := 0; w < workers; w++ {
		ww.Add(1)
		go func(w int) {
			defer ww.Done()
			x := busySeed
			var n int64
			for {
				key, shutdown := q.Get()
				if shutdown {
					break
				}
				k := keyIndex(key)
				var seen int32
				for p := 0; p < producers; p++ {
					seen += offered[p][k]
				}
				if seen == expected && !covered[k] {
					covered[k] = true
					if remaining.Add(-1) == 0 {
						close(allCovered)
					}
				}
				x = busy(x, iters)
				q.Done(key)
				n++
				reconciles[w].n.Store(n)
				lastNs[w].n.Store(int64(time.Since(base)))
			}
			sink[w].n.Store(int64(x))
		}(w)
	}
	t0 := int64(time.Since(base)) // the clock starts at the first add, as in delivered.c
	for p := 0; p < producers; p++ {
		pw.Add(1)
		go func(p int) {
			defer pw.Done()
			mine := offered[p]
			k := p * (drainKeys / producers)
			for j := 0; j < drainAdds/producers; j++ {
				mine[k]++
				q.Add(names[k])
				if k++; k == drainKeys {
					k = 0
				}
			}
			addedNs[p].n.Store(int64(time.Since(base)))
		}(p)
	}
	pw.Wait()
	select {
	case <-allCovered:
	case <-time.After(120 * time.Second):
		fmt.Fprintf(os.Stderr, "bench_workqueue_clientgo: drain: %d keys' last add not processed after 120 s\n",
			remaining.Load())
		os.Exit(1)
	}
	// Every key is covered; a key re-added while its covering reconcile ran
	// comes back once more, and ShutDown lets the workers finish it.
	q.ShutDown()
	ww.Wait()
	end, addsEnd, total := t0, t0, int64(0)
	for p := 0; p < producers; p++ {
		addsEnd = max(addsEnd, addedNs[p].n.Load())
	}
	for w := 0; w < workers; w++ {
		end = max(end, lastNs[w].n.Load())
		total += reconciles[w].n.Load()
	}
	return outcome{float64(end-t0) / 1e9, drainAdds, total, float64(addsEnd-t0) / 1e9}
}

func throughput(producers, workers int) outcome {
	q := workqueue.NewTyped[string]()
	var added, taken [maxThreads]padded
	var stop atomic.Bool
	sum := func(c *[maxThreads]padded, n int) int64 {
		var s int64
		for i := 0; i < n; i++ {
			s += c[i].n.Load()
		}
		return s
	}
	backlog := func() int64 { return sum(&added, producers) - sum(&taken, workers) }
	var pw, ww sync.WaitGroup
	for p := 0; p < producers; p++ {
		pw.Add(1)
		go func(p int) {
			defer pw.Done()
			share := len(names) / producers
			first := p * share
			var n int64
			for !stop.Load() {
				for backlog() >= tpBacklog && !stop.Load() {
					runtime.Gosched()
				}
				for i := 0; i < tpCheck; i++ {
					q.Add(names[first+int(n%int64(share))])
					n++
					added[p].n.Store(n)
				}
			}
		}(p)
	}
	for w := 0; w < workers; w++ {
		ww.Add(1)
		go func(w int) {
			defer ww.Done()
			var n int64
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(key)
				n++
				taken[w].n.Store(n)
			}
		}(w)
	}
	time.Sleep(tpWarmup)
	t0 := time.Now()
	added0, taken0 := sum(&added, producers), sum(&taken, workers)
	time.Sleep(tpWindow)
	secs := time.Since(t0).Seconds()
	a, t := sum(&added, producers)-added0, sum(&taken, workers)-taken0
	stop.Store(true)
	pw.Wait()
	q.ShutDown()
	ww.Wait()
	return outcome{float64(t) / secs, a, t, 0}
}
