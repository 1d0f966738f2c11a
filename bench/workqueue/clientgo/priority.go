// The priority scenario (see bench_workqueue.c) on controller-runtime's
// priority queue: one producer adds keys at NORMAL (0) and LOW (-100),
// priorityWorkers workers get -> done.
package main

import (
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

const (
	prioRounds      = 20
	priorityWorkers = 2
	lowPriority     = -100
)

func keyPriority(i int) *int {
	p := 0
	if i%4 != 0 {
		p = lowPriority
	}
	return &p
}

func priorityQueue() outcome {
	q := priorityqueue.New[string]("") // no name: no metrics, like the other queues here
	var processed, inFlight atomic.Int64
	var ww sync.WaitGroup
	opts := make([]priorityqueue.AddOpts, keys)
	for i := range opts {
		opts[i] = priorityqueue.AddOpts{Priority: keyPriority(i)}
	}
	t0 := time.Now()
	for i := 0; i < priorityWorkers; i++ {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				inFlight.Add(1)
				q.Done(key)
				processed.Add(1)
				inFlight.Add(-1)
			}
		}()
	}
	for round := 0; round < prioRounds; round++ {
		for i := 0; i < keys; i++ {
			q.AddWithOpts(opts[i], names[i])
			if i > 0 {
				q.AddWithOpts(opts[i-1], names[i-1])
			}
		}
		q.AddWithOpts(opts[keys-1], names[keys-1])
	}
	// ShutDown does not drain this queue: wait until it is empty.
	for q.Len() > 0 || inFlight.Load() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	secs := time.Since(t0).Seconds()
	q.ShutDown()
	ww.Wait()
	adds := int64(prioRounds * 2 * keys)
	return outcome{float64(adds) / secs, adds, processed.Load(), 0}
}
