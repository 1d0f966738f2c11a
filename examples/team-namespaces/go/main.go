// team-namespaces on controller-runtime v0.25.3: the twin of ../teams.c and
// ../main.c (same CRD, same objects, same results), written as a kubebuilder
// user would, with the Team read as unstructured (no generated Go types).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func newTeam() *unstructured.Unstructured {
	team := &unstructured.Unstructured{}
	team.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.kcr.dev", Version: "v1alpha1", Kind: "Team"})
	return team
}

type TeamReconciler struct {
	client.Client
}

// ensure creates or updates obj as mutate wants it, owned by team.
func (r *TeamReconciler) ensure(ctx context.Context, team, obj client.Object, mutate func()) error {
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		mutate()
		return controllerutil.SetControllerReference(team, obj, r.Scheme())
	})
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return reconcile.TerminalError(err)
	}
	return err
}

func (r *TeamReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	team := newTeam()
	if err := r.Get(ctx, req.NamespacedName, team); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	nsName := "team-" + team.GetName()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
	if err := r.ensure(ctx, team, ns, func() {}); err != nil {
		return ctrl.Result{}, err
	}
	hard := corev1.ResourceList{}
	for name, field := range map[corev1.ResourceName]string{corev1.ResourceRequestsCPU: "cpu", corev1.ResourceRequestsMemory: "memory"} {
		if v, found, _ := unstructured.NestedFieldNoCopy(team.Object, "spec", "quota", field); found {
			q, err := resource.ParseQuantity(fmt.Sprint(v))
			if err != nil {
				return ctrl.Result{}, reconcile.TerminalError(err)
			}
			hard[name] = q
		}
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-quota", Namespace: nsName}}
	if err := r.ensure(ctx, team, quota, func() { quota.Spec.Hard = hard }); err != nil {
		return ctrl.Result{}, err
	}
	members, _, _ := unstructured.NestedStringSlice(team.Object, "spec", "members")
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "team-members", Namespace: nsName}}
	if err := r.ensure(ctx, team, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
		binding.Subjects = nil
		for _, m := range members {
			binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: m})
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	_ = unstructured.SetNestedField(team.Object, nsName, "status", "namespace")
	_ = unstructured.SetNestedField(team.Object, true, "status", "ready")
	return ctrl.Result{}, r.Status().Update(ctx, team)
}

func main() {
	var metricsAddr, probeAddr string
	var leaderElect bool
	var workers int
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "The address the metrics endpoint binds to.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Enable leader election for controller manager.")
	flag.IntVar(&workers, "workers", 1, "Concurrent reconciles.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "team-namespaces",
	})
	if err == nil {
		err = ctrl.NewControllerManagedBy(mgr).For(newTeam()).
			Owns(&corev1.Namespace{}).Owns(&corev1.ResourceQuota{}).Owns(&rbacv1.RoleBinding{}).
			WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
			Complete(&TeamReconciler{Client: mgr.GetClient()})
	}
	if err == nil {
		err = mgr.AddHealthzCheck("healthz", healthz.Ping)
	}
	if err == nil {
		err = mgr.AddReadyzCheck("readyz", healthz.Ping)
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
