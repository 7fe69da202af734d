package cri

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// verifyRunAsNonRoot is the kubelet's check of runAsNonRoot (the
// container's, else the pod's) before a container is created: against
// runAsUser when set, else against the user the image runs as, which the
// runtime reports (a numeric uid, a user name, or nothing: root). A
// failure is an ErrConfig (CreateContainerConfigError) with the kubelet's
// message.
func (c *Syncer) verifyRunAsNonRoot(ctx context.Context, pod *corev1.Pod, spec *corev1.Container) error {
	var nonRoot *bool
	var user *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot, user = psc.RunAsNonRoot, psc.RunAsUser
	}
	if csc := spec.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			user = csc.RunAsUser
		}
	}
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	podName := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if user != nil {
		if *user == 0 {
			return configError{fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podName, spec.Name)}
		}
		return nil
	}
	st, err := c.rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: spec.Image}, false)
	if err != nil {
		return c.opError("image_status", err)
	}
	uid := new(int64) // no user: root
	name := ""
	if img := st.GetImage(); img != nil {
		switch {
		case img.GetUid() != nil:
			uid = &img.Uid.Value
		case img.GetUsername() != "":
			uid, name = nil, img.Username
		}
	}
	switch {
	case uid == nil:
		return configError{fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", name, podName, spec.Name)}
	case *uid == 0:
		return configError{fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podName, spec.Name)}
	case *uid < 1 || *uid > math.MaxInt32:
		return configError{fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): must be between 0 and %d, inclusive (pod: %q, container: %s)", *uid, math.MaxInt32, math.MaxInt32, podName, spec.Name)}
	}
	return nil
}
