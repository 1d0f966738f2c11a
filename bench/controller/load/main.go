// Load generator for bench/controller, shared by the kcr and the
// controller-runtime runs so both see the same traffic.
//
//	load seed KUBECONFIG NAMESPACE N
//	    creates the namespace and ConfigMaps bench-00000 ... (about 1 KB of
//	    data each) until exactly N exist; prints "objects=<n>".
//	load churn KUBECONFIG NAMESPACE N RATE SECONDS
//	    merge-patches RATE ConfigMaps per second for SECONDS seconds, each one
//	    once (bench-00000 upward, wrapping at N), with the annotation
//	    kcr-bench/sent-ns set to the wall-clock time just before the request
//	    is sent; prints "updates=<n> achieved_rate=<r>".
//	load watch KUBECONFIG NAMESPACE UPDATES
//	    a bare client-go watch (no informer, no queue): lists, prints "ready",
//	    watches from the list's resourceVersion and, once UPDATES annotated
//	    updates arrived, prints "p50_ms=<ms> p99_ms=<ms> updates=<n>", the
//	    latency from the send to the decoded watch event (the floor under a
//	    controller's; bench_watch is the same with kcr).
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func die(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}

func name(i int) string { return fmt.Sprintf("bench-%05d", i) }

func seed(cs *kubernetes.Clientset, ns string, n int) {
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		die(err)
	}
	data := map[string]string{"payload": strings.Repeat("x", 900)}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Data: data}
				_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		die(err)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		die(err)
	}
	count := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "bench-") {
			count++
		}
	}
	if count != n {
		die(fmt.Errorf("namespace %s holds %d bench ConfigMaps, want %d (use a fresh namespace)", ns, count, n))
	}
	fmt.Printf("objects=%d\n", count)
}

func churn(cs *kubernetes.Clientset, ns string, n, rate, secs int) {
	total := rate * secs
	interval := time.Second / time.Duration(rate)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				sent := strconv.FormatInt(time.Now().UnixNano(), 10)
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"kcr-bench/sent-ns":%q}}}`, sent)
				_, err := cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), name(i%n),
					types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				if err != nil {
					failed.Do(func() { die(err) })
				}
			}
		}()
	}
	start := time.Now()
	for i := 0; i < total; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("updates=%d achieved_rate=%.1f\n", total, float64(total)/time.Since(start).Seconds())
}

func watchLatency(cs *kubernetes.Clientset, ns string, want int) {
	ctx := context.Background()
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		die(err)
	}
	fmt.Println("ready")
	timeout := int64(300)
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		ResourceVersion: list.ResourceVersion, TimeoutSeconds: &timeout})
	if err != nil {
		die(err)
	}
	defer w.Stop()
	lat := make([]float64, 0, want)
	for ev := range w.ResultChan() {
		now := time.Now().UnixNano()
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Modified || !ok {
			continue
		}
		if sent, err := strconv.ParseInt(cm.Annotations["kcr-bench/sent-ns"], 10, 64); err == nil {
			lat = append(lat, float64(now-sent)/1e6)
			if len(lat) == want {
				break
			}
		}
	}
	if len(lat) < want {
		die(fmt.Errorf("the watch ended after %d of %d updates", len(lat), want))
	}
	sort.Float64s(lat)
	p := func(q float64) float64 {
		i := int(q*float64(len(lat))+0.5) - 1
		if i < 0 {
			i = 0
		}
		return lat[i]
	}
	fmt.Printf("p50_ms=%.3f p99_ms=%.3f updates=%d\n", p(.5), p(.99), len(lat))
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: load seed KUBECONFIG NS N | load churn KUBECONFIG NS N RATE SECONDS | load watch KUBECONFIG NS UPDATES")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[2])
	if err != nil {
		die(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die(err)
	}
	ints := make([]int, 0, 3)
	for _, a := range os.Args[4:] {
		v, err := strconv.Atoi(a)
		if err != nil || v <= 0 {
			die(fmt.Errorf("bad number %q", a))
		}
		ints = append(ints, v)
	}
	switch {
	case os.Args[1] == "seed" && len(ints) == 1:
		seed(cs, os.Args[3], ints[0])
	case os.Args[1] == "churn" && len(ints) == 3:
		churn(cs, os.Args[3], ints[0], ints[1], ints[2])
	case os.Args[1] == "watch" && len(ints) == 1:
		watchLatency(cs, os.Args[3], ints[0])
	default:
		fmt.Fprintln(os.Stderr, "usage: load seed KUBECONFIG NS N | load churn KUBECONFIG NS N RATE SECONDS | load watch KUBECONFIG NS UPDATES")
		os.Exit(2)
	}
}
