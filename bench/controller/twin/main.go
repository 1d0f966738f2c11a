// Go twin of bench_controller: a controller-runtime manager reconciling the
// ConfigMaps of one namespace, with controller-runtime's defaults (typed
// cache, one worker, its priority queue off as it is by default) except
// that managedFields are stripped before caching, as kcr does by default.
// The reconcile reads the ConfigMap from the cache and, when it carries the
// annotation kcr-bench/sent-ns (set by bench/controller/load just before it
// sends an update), records the latency from that send to this reconcile.
//
//	twin initial KUBECONFIG NAMESPACE N
//	    prints "seconds=<s> rss_mb=<MB> reconciles=<n>" once N distinct
//	    ConfigMaps were reconciled, timed from manager creation.
//	twin churn KUBECONFIG NAMESPACE UPDATES
//	    prints "ready" once every ConfigMap was reconciled once, then
//	    "p50_ms=<ms> p99_ms=<ms> updates=<n> rss_mb=<MB> cpu_us=<us> events=<n> vcsw=<n>"
//	    once UPDATES updated ConfigMaps were reconciled (or after 300 s:
//	    exit 1). cpu_us is the process's user + system CPU time (getrusage)
//	    from "ready" to the last update's reconcile, events the reconciles
//	    in that window (as bench_controller counts them), vcsw its threads'
//	    voluntary context switches in that window.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const sentAnnotation = "kcr-bench/sent-ns"

func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(s.Text())[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// tally counts reconciled keys and update latencies; Reconcile runs on the
// manager's worker goroutine, main reads it after done is closed.
type tally struct {
	mu        sync.Mutex
	seen      map[string]bool
	latencies []float64 // ms
	want      int       // distinct keys (initial) or updates (churn)
	churn     bool
	churning  bool // every ConfigMap was reconciled once: latencies count from now on
	ready     chan struct{}
	done      chan struct{}
	total     int // ConfigMaps in the namespace, for the churn's ready line
	// churn: reconciles after "ready", and the process's CPU time at
	// "ready" and at the last update's reconcile
	windowReconciles int
	cpuStart, cpuEnd time.Duration
	vcswStart, vcswEnd int64
}

// cpuTime is the process's user + system CPU time so far, and its
// threads' voluntary context switches.
func cpuTime() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		die(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw
}

func (t *tally) Reconcile(ctx context.Context, req ctrl.Request, c client.Client) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := time.Now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.churning {
		t.windowReconciles++
	}
	if !t.seen[req.Name] {
		t.seen[req.Name] = true
		if !t.churn && len(t.seen) == t.want {
			close(t.done)
		}
		if t.churn && len(t.seen) == t.total {
			t.cpuStart, t.vcswStart = cpuTime()
			close(t.ready)
			t.churning = true
			return ctrl.Result{}, nil
		}
	}
	if sent, ok := cm.Annotations[sentAnnotation]; ok && t.churning && len(t.latencies) < t.want {
		if ns, err := strconv.ParseInt(sent, 10, 64); err == nil {
			t.latencies = append(t.latencies, float64(now-ns)/1e6)
			if len(t.latencies) == t.want {
				t.cpuEnd, t.vcswEnd = cpuTime()
				close(t.done)
			}
		}
	}
	return ctrl.Result{}, nil
}

func percentile(v []float64, p float64) float64 {
	sort.Float64s(v)
	i := int(p*float64(len(v))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(v) {
		i = len(v) - 1
	}
	return v[i]
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "twin:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 5 || (os.Args[1] != "initial" && os.Args[1] != "churn") {
		fmt.Fprintln(os.Stderr, "usage: twin initial|churn KUBECONFIG NAMESPACE N")
		os.Exit(2)
	}
	mode, kubeconfig, ns := os.Args[1], os.Args[2], os.Args[3]
	n, err := strconv.Atoi(os.Args[4])
	if err != nil || n <= 0 {
		die(fmt.Errorf("bad count %q", os.Args[4]))
	}
	log.SetLogger(zap.New(zap.UseDevMode(false)))
	start := time.Now()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		die(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{ns: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
		},
	})
	if err != nil {
		die(err)
	}
	t := &tally{seen: map[string]bool{}, want: n, churn: mode == "churn",
		ready: make(chan struct{}), done: make(chan struct{})}
	if t.churn {
		var list corev1.ConfigMapList
		direct, err := client.New(cfg, client.Options{})
		if err != nil {
			die(err)
		}
		if err := direct.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			die(err)
		}
		t.total = len(list.Items)
	}
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("bench").
		Complete(ctrlReconciler(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			return t.Reconcile(ctx, req, c)
		}))
	if err != nil {
		die(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil {
			die(err)
		}
	}()
	timeout := time.After(300 * time.Second)
	if t.churn {
		select {
		case <-t.ready:
			fmt.Println("ready")
		case <-timeout:
			die(fmt.Errorf("not every ConfigMap reconciled within 300 s"))
		}
	}
	select {
	case <-t.done:
	case <-timeout:
		die(fmt.Errorf("timed out: %d of %d", len(t.seen), n))
	}
	secs := time.Since(start).Seconds()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.churn {
		fmt.Printf("p50_ms=%.3f p99_ms=%.3f updates=%d rss_mb=%.1f cpu_us=%d events=%d vcsw=%d\n",
			percentile(t.latencies, 0.50), percentile(t.latencies, 0.99), len(t.latencies), vmHWM(),
			(t.cpuEnd - t.cpuStart).Microseconds(), t.windowReconciles, t.vcswEnd-t.vcswStart)
	} else {
		fmt.Printf("seconds=%.3f rss_mb=%.1f reconciles=%d\n", secs, vmHWM(), len(t.seen))
	}
}

type ctrlReconciler func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f ctrlReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}
