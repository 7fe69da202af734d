package sidebyside

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dataObject names the ConfigMap, the Secret and the ServiceAccount every
// pod-data pod reads.
const dataObject = "bench-data"

// podDataFigures are a node's API cost for pods that read data from the
// API: each mounts one ConfigMap, one Secret (both shared by all) and a
// projected service-account token of its own.
type podDataFigures struct {
	setUpReq, setUpSent   float64 // per pod, from create to all Running and Ready, idle share taken off
	hourReq               float64 // per pod per hour while they run: the pods' own requests
	setUpDetail, idleNote string
}

// ensureDataObjects creates the shared ConfigMap, Secret and ServiceAccount
// once.
func (b *bench) ensureDataObjects() {
	t, ctx, admin := b.t, b.ctx, b.admin
	for _, create := range []func() error{
		func() error {
			_, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: dataObject}, Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: dataObject}, StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: dataObject}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// dataPod is a pod that mounts the shared ConfigMap and Secret and a token
// of the shared ServiceAccount, and reads the ConfigMap into its env.
func (b *bench) dataPod(name, nodeName string) *corev1.Pod {
	p := b.pod(name, nodeName, "trap 'exit 0' TERM; sleep 3600 & wait", func(c *corev1.Container) {
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: "cm", MountPath: "/data/cm"}, {Name: "secret", MountPath: "/data/secret"}, {Name: "token", MountPath: "/data/token"}}
		c.Env = []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: dataObject}, Key: "greeting"}}}}
	})
	expiry := int64(3600)
	p.Spec.ServiceAccountName = dataObject
	p.Spec.Volumes = []corev1.Volume{
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: dataObject}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: dataObject}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}}}}}},
	}
	return p
}

// podData runs BENCH_DATA_PODS pod-data pods on n, counts the node's
// requests and bytes from their creation to all Running and Ready and over
// MEASURE_WINDOW while they run (the idle rate taken off both), and deletes
// them.
func (b *bench) podData(kind string, n *node, pw *podWatch, r *result) podDataFigures {
	b.ensureDataObjects()
	var f podDataFigures
	prefix := kind[:1] + "-"
	s0 := b.sample(n)
	var names []string
	for i := range b.dataPods {
		name := fmt.Sprintf("%sdata-%d", prefix, i)
		names = append(names, name)
		b.create(b.dataPod(name, n.name))
	}
	uids := map[string]bool{}
	for _, name := range names {
		s := b.wait(pw, name, "Running and Ready", 2*time.Minute, func(s seen) bool { return !s.ready.IsZero() })
		uids[s.uid] = true
	}
	s1 := b.sample(n)
	pods := float64(b.dataPods)
	idleShare := float64(s1.at.Sub(s0.at)) / float64(time.Hour)
	reqs, detail := b.requests(n.name, s0.at, s1.at)
	f.setUpReq = (float64(reqs) - r.reqHour*idleShare) / pods
	f.setUpSent = (float64(s1.sent-s0.sent) - r.sentHour*idleShare) / pods
	f.setUpDetail = formatDetail(detail, 1/pods)
	b.pause(b.window)
	n.alive()
	s2 := b.sample(n)
	hour := float64(time.Hour) / float64(s2.at.Sub(s1.at))
	_, detail = b.requests(n.name, s1.at, s2.at)
	// The pods' own requests: everything but the node's heartbeat (its
	// lease and Node), which the idle rate already counts.
	own := 0
	for what, c := range detail {
		if !strings.HasSuffix(what, " leases") && !strings.HasSuffix(what, " nodes") && !strings.HasSuffix(what, " nodes/status") {
			own += c
		}
	}
	f.hourReq = float64(own) * hour / pods
	f.idleNote = formatDetail(detail, hour)
	for _, name := range names {
		b.delete(name, 0)
	}
	b.waitNoSandboxes(uids, 2*time.Minute, false)
	return f
}
