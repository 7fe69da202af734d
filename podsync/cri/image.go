package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit/runtime"
)

// EnsureImage makes sure the runtime has image, pulling it when it is
// missing. A failure is logged: what needs the image then fails with the
// runtime's own error.
func EnsureImage(ctx context.Context, rt runtime.Runtime, image string) {
	if image == "" {
		return
	}
	logger := klog.FromContext(ctx)
	spec := &runtimeapi.ImageSpec{Image: image}
	if st, err := rt.ImageStatus(ctx, spec, false); err == nil && st.GetImage() != nil {
		logger.V(2).Info("Sandbox image present", "image", image)
		return
	}
	ref, err := rt.PullImage(ctx, spec, nil, nil)
	if err != nil {
		logger.Error(err, "Cannot pull the sandbox image", "image", image)
		return
	}
	logger.Info("Pulled the sandbox image", "image", image, "ref", ref)
}
