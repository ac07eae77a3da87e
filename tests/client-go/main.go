// Command client-go-e2e drives a Flotilla API server with client-go at its default
// configuration: typed clients write protobuf bodies and prefer protobuf answers.
//
// It watches ConfigMaps directly and through a SharedInformer (list, then watch), creates, updates, gets, lists and deletes a ConfigMap and a Deployment, creates a Secret
// and a Namespace, records an events.k8s.io/v1 Event (as client-go's event recorder does), acquires a lease through leader election with a LeaseLock, and checks that
// requests and answers were protobuf. It prints one "ok <step>" line per step and exits non-zero
// on the first failure.
//
// Usage: client-go-e2e -kubeconfig <path>
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// mediaLog records the Content-Type of every request body sent and answer received.
type mediaLog struct {
	mu   sync.Mutex
	sent map[string]int
	got  map[string]int
	next http.RoundTripper
}

func (m *mediaLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ct := req.Header.Get("Content-Type"); ct != "" {
		m.sent[req.Method+" "+ct]++
	}
	if err == nil {
		m.got[resp.Header.Get("Content-Type")]++
	}
	return resp, err
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func check(err error, step string) {
	if err != nil {
		fail("%s: %v", step, err)
	}
	fmt.Println("ok", step)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the server under test")
	namespace := flag.String("namespace", "default", "namespace to work in")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	log := &mediaLog{sent: map[string]int{}, got: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		log.next = rt
		return log
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("clientset: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := *namespace

	watchConfigMaps(ctx, cs, ns)
	informer(ctx, cs, ns)
	configMaps(ctx, cs, ns)
	deployments(ctx, cs, ns)
	others(ctx, cs, ns)
	leaderElection(ctx, cs, ns)

	log.mu.Lock()
	defer log.mu.Unlock()
	fmt.Printf("sent: %v\nreceived: %v\n", log.sent, log.got)
	if log.sent["POST "+protobuf] == 0 || log.sent["PUT "+protobuf] == 0 {
		fail("client-go did not write protobuf: %v", log.sent)
	}
	if log.got[protobuf] == 0 {
		fail("the server never answered protobuf: %v", log.got)
	}
	if log.got[protobuf+";stream=watch"] == 0 {
		fail("the watch was not a protobuf stream: %v", log.got)
	}
	fmt.Println("ok protobuf on the wire")
}

func watchConfigMaps(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	c := cs.CoreV1().ConfigMaps(ns)
	w, err := c.Watch(ctx, metav1.ListOptions{LabelSelector: "app=cg-watch"})
	check(err, "configmap watch")
	defer w.Stop()
	_, err = c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cg-watched", Labels: map[string]string{"app": "cg-watch"}},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	check(err, "configmap create (watched)")
	select {
	case ev, ok := <-w.ResultChan():
		cm, isConfigMap := ev.Object.(*corev1.ConfigMap)
		if !ok || ev.Type != watch.Added || !isConfigMap || cm.Name != "cg-watched" || cm.Data["k"] != "v" {
			fail("configmap watch: got %v %#v", ev.Type, ev.Object)
		}
	case <-time.After(20 * time.Second):
		fail("configmap watch: no event in 20s")
	}
	fmt.Println("ok configmap watch event")
}

// informer runs a SharedInformer on Deployments: its initial list must hold an object created
// before it started, and its watch must deliver an update and a delete made after it synced.
func informer(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	c := cs.AppsV1().Deployments(ns)
	replicas := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cg-informed", Labels: map[string]string{"app": "cg-informed"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cg-informed"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "cg-informed"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	_, err := c.Create(ctx, d, metav1.CreateOptions{})
	check(err, "deployment create (before the informer)")
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().Deployments().Informer()
	events := make(chan string, 16)
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok && d.Name == "cg-informed" {
				events <- "add"
			}
		},
		UpdateFunc: func(_, obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok && d.Name == "cg-informed" && *d.Spec.Replicas == 3 {
				events <- "update"
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok && d.Name == "cg-informed" {
				events <- "delete"
			}
		},
	})
	check(err, "informer handler")
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	synced := factory.WaitForCacheSync(stop)
	for typ, ok := range synced {
		if !ok {
			fail("informer: %v did not sync", typ)
		}
	}
	fmt.Println("ok informer synced")
	expect := func(want string) {
		select {
		case got := <-events:
			if got != want {
				fail("informer: want %s, got %s", want, got)
			}
		case <-time.After(20 * time.Second):
			fail("informer: no %s event in 20s", want)
		}
		fmt.Println("ok informer", want)
	}
	expect("add")
	cur, err := c.Get(ctx, "cg-informed", metav1.GetOptions{})
	check(err, "deployment get (informed)")
	three := int32(3)
	cur.Spec.Replicas = &three
	_, err = c.Update(ctx, cur, metav1.UpdateOptions{})
	check(err, "deployment update (informed)")
	expect("update")
	check(c.Delete(ctx, "cg-informed", metav1.DeleteOptions{}), "deployment delete (informed)")
	expect("delete")
}

func configMaps(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	c := cs.CoreV1().ConfigMaps(ns)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cg-config", Labels: map[string]string{"app": "cg"}},
		Data:       map[string]string{"a": "1", "empty": ""},
		BinaryData: map[string][]byte{"bin": {0, 1, 2, 255}},
	}
	created, err := c.Create(ctx, cm, metav1.CreateOptions{})
	check(err, "configmap create")
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		fail("configmap create: server fields missing: %+v", created.ObjectMeta)
	}
	if v, ok := created.Data["empty"]; !ok || v != "" {
		fail("configmap create: empty value lost: %v", created.Data)
	}
	if string(created.BinaryData["bin"]) != string([]byte{0, 1, 2, 255}) {
		fail("configmap create: binaryData %v", created.BinaryData)
	}
	created.Data["a"] = "2"
	updated, err := c.Update(ctx, created, metav1.UpdateOptions{})
	check(err, "configmap update")
	if updated.Data["a"] != "2" || updated.ResourceVersion == created.ResourceVersion {
		fail("configmap update: %+v", updated)
	}
	got, err := c.Get(ctx, "cg-config", metav1.GetOptions{})
	check(err, "configmap get")
	if got.Data["a"] != "2" || got.Labels["app"] != "cg" {
		fail("configmap get: %+v", got)
	}
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: "app=cg"})
	check(err, "configmap list")
	if len(list.Items) != 1 || list.Items[0].Name != "cg-config" || list.ResourceVersion == "" {
		fail("configmap list: %+v", list)
	}
	check(c.Delete(ctx, "cg-config", metav1.DeleteOptions{}), "configmap delete")
	if _, err := c.Get(ctx, "cg-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		fail("configmap get after delete: want NotFound, got %v", err)
	}
	fmt.Println("ok configmap gone")
}

func deployments(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	c := cs.AppsV1().Deployments(ns)
	two := int32(2)
	labels := map[string]string{"app": "cg-web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cg-web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "nginx",
					Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}
	created, err := c.Create(ctx, d, metav1.CreateOptions{})
	check(err, "deployment create")
	if created.Spec.Replicas == nil || *created.Spec.Replicas != 2 ||
		created.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" ||
		created.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort != 80 {
		fail("deployment create: %+v", created.Spec)
	}
	// Zero through a pointer must survive: replicas 0 is not "unset".
	zero := int32(0)
	created.Spec.Replicas = &zero
	updated, err := c.Update(ctx, created, metav1.UpdateOptions{})
	check(err, "deployment update")
	if updated.Spec.Replicas == nil || *updated.Spec.Replicas != 0 {
		fail("deployment update: replicas %v", updated.Spec.Replicas)
	}
	got, err := c.Get(ctx, "cg-web", metav1.GetOptions{})
	check(err, "deployment get")
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 0 || got.Generation < 2 {
		fail("deployment get: replicas %v generation %d", got.Spec.Replicas, got.Generation)
	}
	list, err := c.List(ctx, metav1.ListOptions{})
	check(err, "deployment list")
	found := false
	for _, item := range list.Items {
		found = found || item.Name == "cg-web"
	}
	if !found {
		fail("deployment list: cg-web missing from %d items", len(list.Items))
	}
	check(c.Delete(ctx, "cg-web", metav1.DeleteOptions{}), "deployment delete")
	if _, err := c.Get(ctx, "cg-web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		fail("deployment get after delete: want NotFound, got %v", err)
	}
	fmt.Println("ok deployment gone")
}

func others(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	s, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cg-secret"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"k": []byte("v")},
	}, metav1.CreateOptions{})
	check(err, "secret create")
	if string(s.Data["k"]) != "v" {
		fail("secret create: %v", s.Data)
	}
	n, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "cg-ns"},
	}, metav1.CreateOptions{})
	check(err, "namespace create")
	if n.Status.Phase != corev1.NamespaceActive {
		fail("namespace create: phase %q", n.Status.Phase)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name"},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		fail("invalid name: want Invalid, got %v", err)
	}
	fmt.Println("ok invalid name refused:", strings.SplitN(err.Error(), ":", 2)[0])
	now := metav1.NowMicro()
	ev, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "cg-event"},
		EventTime:           now,
		ReportingController: "example.com/client-go-e2e",
		ReportingInstance:   "client-go-e2e-1",
		Action:              "Check",
		Reason:              "Checked",
		Regarding:           corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "cg-cm", APIVersion: "v1"},
		Note:                "written as protobuf",
		Type:                corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	check(err, "events.k8s.io event create")
	if ev.Note != "written as protobuf" || ev.Regarding.Name != "cg-cm" {
		fail("events.k8s.io event create: %+v", ev)
	}
	core, err := cs.CoreV1().Events(ns).Get(ctx, "cg-event", metav1.GetOptions{})
	check(err, "events.k8s.io event read as core/v1")
	if core.Message != "written as protobuf" || core.InvolvedObject.Name != "cg-cm" || core.Reason != "Checked" {
		fail("core/v1 view of the event: %+v", core)
	}
}

func leaderElection(ctx context.Context, cs *kubernetes.Clientset, ns string) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: "cg-leader", Namespace: ns},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "cg-candidate"},
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	led := false
	leaderelection.RunOrDie(lctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     time.Second,
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				led = true
				cancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	if !led {
		fail("leader election: the lease was never acquired")
	}
	fmt.Println("ok leader election acquired the lease")
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, "cg-leader", metav1.GetOptions{})
	check(err, "lease get")
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "cg-candidate" ||
		lease.Spec.AcquireTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		fail("lease: %+v", lease.Spec)
	}
}
