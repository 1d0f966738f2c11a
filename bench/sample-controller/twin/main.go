// Go twin of examples/sample-controller for bench/sample-controller: the
// logic of kubernetes/sample-controller (Foo -> Deployment), written on
// client-go v0.37.2 informers, workqueue and event recorder as that project
// does, with the Foo resource read through the dynamic client (the
// sample-controller module itself is not served by the module proxy, and
// its generated typed client is not needed for the same work).
//
//	twin --kubeconfig FILE [--workers N]
//
// Runs until SIGTERM/SIGINT. Prints "synced" on stdout once its caches are.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

const fieldManager = "sample-controller"

var fooGVR = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}
var fooGVK = schema.GroupVersionKind{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}

type controller struct {
	kube        kubernetes.Interface
	dyn         dynamic.Interface
	deployments appslisters.DeploymentLister
	foos        cache.GenericLister
	queue       workqueue.TypedRateLimitingInterface[cache.ObjectName]
	recorder    record.EventRecorder
}

func (c *controller) enqueueFoo(obj interface{}) {
	if name, err := cache.ObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

// handleObject enqueues the Foo controlling a Deployment, if any.
func (c *controller) handleObject(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "Foo" {
		return
	}
	if _, err := c.foos.ByNamespace(o.GetNamespace()).Get(ref.Name); err != nil {
		return
	}
	c.queue.Add(cache.ObjectName{Namespace: o.GetNamespace(), Name: ref.Name})
}

func newDeployment(foo *unstructured.Unstructured, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo.GetName()}
	name, _, _ := unstructured.NestedString(foo.Object, "spec", "deploymentName")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       foo.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, fooGVK)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}

func (c *controller) sync(ctx context.Context, key cache.ObjectName) error {
	obj, err := c.foos.ByNamespace(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	foo := obj.(*unstructured.Unstructured)
	name, _, _ := unstructured.NestedString(foo.Object, "spec", "deploymentName")
	if name == "" {
		fmt.Fprintf(os.Stderr, "%s: deployment name must be specified\n", key)
		return nil
	}
	replicas64, hasReplicas, _ := unstructured.NestedInt64(foo.Object, "spec", "replicas")
	replicas := int32(replicas64)
	if !hasReplicas {
		replicas = 1
	}
	d, err := c.deployments.Deployments(foo.GetNamespace()).Get(name)
	if apierrors.IsNotFound(err) {
		d, err = c.kube.AppsV1().Deployments(foo.GetNamespace()).Create(ctx, newDeployment(foo, replicas),
			metav1.CreateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(d, foo) {
		msg := fmt.Sprintf("Resource %q already exists and is not managed by Foo", d.Name)
		c.recorder.Event(foo, corev1.EventTypeWarning, "ErrResourceExists", msg)
		return fmt.Errorf("%s", msg)
	}
	if hasReplicas && d.Spec.Replicas != nil && *d.Spec.Replicas != replicas {
		d, err = c.kube.AppsV1().Deployments(foo.GetNamespace()).Update(ctx, newDeployment(foo, replicas),
			metav1.UpdateOptions{FieldManager: fieldManager})
		if err != nil {
			return err
		}
	}
	fooCopy := foo.DeepCopy()
	if err := unstructured.SetNestedField(fooCopy.Object, int64(d.Status.AvailableReplicas), "status", "availableReplicas"); err != nil {
		return err
	}
	if _, err := c.dyn.Resource(fooGVR).Namespace(foo.GetNamespace()).UpdateStatus(ctx, fooCopy,
		metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return err
	}
	c.recorder.Event(foo, corev1.EventTypeNormal, "Synced", "Foo synced successfully")
	return nil
}

func (c *controller) worker(ctx context.Context) {
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		if err := c.sync(ctx, key); err != nil {
			c.queue.AddRateLimited(key)
		} else {
			c.queue.Forget(key)
		}
		c.queue.Done(key)
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	workers := flag.Int("workers", 2, "worker goroutines")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	kubeInf := kubeinformers.NewSharedInformerFactory(kube, 30*time.Second)
	fooInf := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 30*time.Second)
	deployInformer := kubeInf.Apps().V1().Deployments()
	fooInformer := fooInf.ForResource(fooGVR)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	c := &controller{
		kube: kube, dyn: dyn,
		deployments: deployInformer.Lister(),
		foos:        fooInformer.Lister(),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()),
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "sample-controller"}),
	}
	_, _ = fooInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueFoo,
		UpdateFunc: func(_, n interface{}) { c.enqueueFoo(n) },
	})
	_, _ = deployInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.handleObject,
		UpdateFunc: func(o, n interface{}) {
			if o.(*appsv1.Deployment).ResourceVersion == n.(*appsv1.Deployment).ResourceVersion {
				return
			}
			c.handleObject(n)
		},
		DeleteFunc: c.handleObject,
	})
	kubeInf.Start(ctx.Done())
	fooInf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), deployInformer.Informer().HasSynced, fooInformer.Informer().HasSynced) {
		fmt.Fprintln(os.Stderr, "caches did not sync")
		os.Exit(1)
	}
	fmt.Println("synced")
	for i := 0; i < *workers; i++ {
		go c.worker(ctx)
	}
	<-ctx.Done()
	c.queue.ShutDown()
	broadcaster.Shutdown()
}
