// tracereport: where a churn event's time goes, per stage, from the files a
// traced bench_controller churn run writes (KCR_TRACE=FILE: the library's
// per-stage stamps in FILE, the bench's send and reconcile times in
// FILE.sent; see core/trace.h).
//
//	tracereport FILE
//
// prints, for every update whose stamps are complete, the p50/p90/p99/max of
// each stage (ms) and, for the slowest 1% end to end, the mean time of each
// stage: which stage makes the tail.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Stages of core/trace.h, in its file's column order, then the bench's own.
var stamps = []string{"sent", "recv", "decoded", "fifo", "pop", "handler", "enqueued", "got", "start", "reconciled"}

var stages = []struct{ name, from, to string }{
	{"apiserver: sent -> bytes received", "sent", "recv"},
	{"decode+transform", "recv", "decoded"},
	{"DeltaFIFO push", "decoded", "fifo"},
	{"hand-off reflector -> informer", "fifo", "pop"},
	{"cache update + queue -> routing", "pop", "handler"},
	{"routing + workqueue add", "handler", "enqueued"},
	{"hand-off workqueue -> worker", "enqueued", "got"},
	{"worker: get -> reconcile start", "got", "start"},
	{"reconcile start -> bench stamp", "start", "reconciled"},
	{"kcr total: bytes received -> reconcile", "recv", "reconciled"},
	{"end to end: sent -> reconcile", "sent", "reconciled"},
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "tracereport:", err)
	os.Exit(1)
}

// lines calls fn with the fields of every non-comment line of path.
func lines(path string, fn func([]string) error) {
	f, err := os.Open(path)
	if err != nil {
		die(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			if err := fn(strings.Fields(l)); err != nil {
				die(fmt.Errorf("%s: %q: %w", path, l, err))
			}
		}
	}
	if err := sc.Err(); err != nil {
		die(err)
	}
}

func ints(fields []string) ([]int64, error) {
	v := make([]int64, len(fields))
	for i, s := range fields {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, err
		}
		v[i] = n
	}
	return v, nil
}

func pct(v []float64, p float64) float64 {
	i := int(p*float64(len(v))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(v) {
		i = len(v) - 1
	}
	return v[i]
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tracereport FILE (written by KCR_TRACE=FILE bench_controller churn ...)")
		os.Exit(2)
	}
	// the library's records: the last complete one per key wins (one update per key in churn)
	trace := map[string][]int64{}
	lines(os.Args[1], func(f []string) error {
		if len(f) != 9 {
			return fmt.Errorf("want a key and 8 stamps")
		}
		v, err := ints(f[1:])
		if err != nil {
			return err
		}
		if v[len(v)-1] != 0 {
			trace[f[0]] = v
		}
		return nil
	})
	var events []map[string]float64 // stamp name -> ms since sent
	missing := 0
	lines(os.Args[1]+".sent", func(f []string) error {
		if len(f) != 3 {
			return fmt.Errorf("want key sent_ns reconciled_ns")
		}
		v, err := ints(f[1:])
		if err != nil {
			return err
		}
		t, ok := trace[f[0]]
		if !ok || t[0] == 0 || t[0] < v[0] {
			missing++ // coalesced, dropped, or a record of an older change
			return nil
		}
		e := map[string]float64{"sent": 0, "reconciled": float64(v[1]-v[0]) / 1e6}
		for i, name := range stamps[1:9] {
			e[name] = float64(t[i]-v[0]) / 1e6
		}
		events = append(events, e)
		return nil
	})
	if len(events) == 0 {
		die(fmt.Errorf("no update has a complete trace (%d without)", missing))
	}
	fmt.Printf("%d updates traced (%d without a complete record)\n", len(events), missing)
	fmt.Printf("%-40s %8s %8s %8s %8s\n", "stage (ms)", "p50", "p90", "p99", "max")
	for _, s := range stages {
		v := make([]float64, len(events))
		for i, e := range events {
			v[i] = e[s.to] - e[s.from]
		}
		sort.Float64s(v)
		fmt.Printf("%-40s %8.3f %8.3f %8.3f %8.3f\n", s.name, pct(v, .5), pct(v, .9), pct(v, .99), v[len(v)-1])
	}
	sort.Slice(events, func(i, j int) bool { return events[i]["reconciled"] < events[j]["reconciled"] })
	tail := events[len(events)-(len(events)+99)/100:]
	fmt.Printf("slowest 1%% end to end (%d updates, from %.3f ms): mean ms per stage\n", len(tail), tail[0]["reconciled"])
	for _, s := range stages[:9] {
		sum := 0.0
		for _, e := range tail {
			sum += e[s.to] - e[s.from]
		}
		fmt.Printf("  %-38s %8.3f\n", s.name, sum/float64(len(tail)))
	}
}
