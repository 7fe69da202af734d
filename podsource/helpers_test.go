package podsource

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waitTimeout bounds every wait for an update; the tests never sleep.
const waitTimeout = 15 * time.Second

func nextUpdate(t *testing.T, ch <-chan Update) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(waitTimeout):
		t.Fatalf("no update within %v", waitTimeout)
		return Update{}
	}
}

// noUpdate checks that nothing is waiting on ch right now.
func noUpdate(t *testing.T, ch <-chan Update) {
	t.Helper()
	select {
	case u := <-ch:
		t.Fatalf("unexpected update %v", describe(u))
	default:
	}
}

func describe(u Update) string {
	s := u.Op.String() + " " + u.Source + " ["
	for i, p := range u.Pods {
		if i > 0 {
			s += " "
		}
		s += p.Name + "/" + string(p.UID)
	}
	return s + "]"
}

func expectUpdate(t *testing.T, ch <-chan Update, want string) Update {
	t.Helper()
	u := nextUpdate(t, ch)
	if got := describe(u); got != want {
		t.Fatalf("update %s, want %s", got, want)
	}
	return u
}

func testPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec:       v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app", Image: "app:1"}}},
	}
}

// noPods is a MirrorPodsOptions.StaticPods with no static pods.
func noPods() []*v1.Pod { return nil }
