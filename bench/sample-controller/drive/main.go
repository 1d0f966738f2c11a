// Driver of bench/sample-controller, the same for both controllers: creates
// N Foos at once in a fresh namespace and reports the time until every Foo's
// status.availableReplicas equals its spec.replicas, watching the Foos (no
// polling), then deletes the namespace.
//
//	drive KUBECONFIG NAMESPACE N REPLICAS   prints "seconds=<s> foos=<n>"
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var fooGVR = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}

func die(err error) {
	fmt.Fprintln(os.Stderr, "drive:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: drive KUBECONFIG NAMESPACE N REPLICAS")
		os.Exit(2)
	}
	ns := os.Args[2]
	n, err1 := strconv.Atoi(os.Args[3])
	replicas, err2 := strconv.Atoi(os.Args[4])
	if err1 != nil || err2 != nil || n <= 0 || replicas <= 0 {
		die(fmt.Errorf("bad N or REPLICAS"))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		die(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		die(err)
	}
	defer func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	foos := dyn.Resource(fooGVR).Namespace(ns)
	w, err := foos.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		die(err)
	}
	defer w.Stop()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprintf("foo-%04d", i)
			foo := &unstructured.Unstructured{Object: map[string]interface{}{
				"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
				"metadata": map[string]interface{}{"name": name},
				"spec":     map[string]interface{}{"deploymentName": name, "replicas": int64(replicas)},
			}}
			if _, err := foos.Create(ctx, foo, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		die(err)
	}
	done := map[string]bool{}
	see := func(u *unstructured.Unstructured) {
		avail, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
		if avail == int64(replicas) {
			done[u.GetName()] = true
		}
	}
	lastRV := ""
	deadline := time.After(600 * time.Second)
	for len(done) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The apiserver ends watches when it likes (a CRD's storage
				// is rebuilt after the CRD changes, e.g. just after it was
				// created): resume from the last version seen, or from a
				// list when none was.
				if lastRV == "" {
					list, err := foos.List(ctx, metav1.ListOptions{})
					if err != nil {
						die(err)
					}
					for i := range list.Items {
						see(&list.Items[i])
					}
					lastRV = list.GetResourceVersion()
				}
				if w, err = foos.Watch(ctx, metav1.ListOptions{ResourceVersion: lastRV}); err != nil {
					die(fmt.Errorf("watch ended with %d of %d Foos available, and again: %v", len(done), n, err))
				}
				continue
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			u := ev.Object.(*unstructured.Unstructured)
			lastRV = u.GetResourceVersion()
			see(u)
		case <-deadline:
			die(fmt.Errorf("%d of %d Foos available after 600 s", len(done), n))
		}
	}
	fmt.Printf("seconds=%.3f foos=%d\n", time.Since(start).Seconds(), len(done))
}
