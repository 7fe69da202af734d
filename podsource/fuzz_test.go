package podsource

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// FuzzDecodeManifest feeds arbitrary bytes to both decoders: they must not
// panic, every rejection must be a *ManifestError, and every pod accepted
// must carry the static pod defaults and pass validation again.
func FuzzDecodeManifest(f *testing.F) {
	for _, seed := range []string{
		webYAML,
		manifest("a", "a:1"),
		podList("a", "b"),
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","uid":"u-1"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: v\nspec:\n  volumes:\n  - name: s\n    secret:\n      secretName: x\n  containers:\n  - name: c\n    image: i\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: A\n  - name: A\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: &a x\nspec: *a\n",
		"kind: Pod\n",
		"",
		"null",
		"- 1\n- 2\n",
		"{{{",
		"\xff\xfe",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: c\n    image: i\n    ports:\n    - containerPort: 99999\n",
	} {
		f.Add([]byte(seed))
	}
	origin := Origin{Source: FileSource, Location: "/m/fuzz.yaml", NodeName: "fuzz-node"}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(pods []*v1.Pod, err error) {
			if err != nil {
				var me *ManifestError
				if !errors.As(err, &me) || !errors.Is(err, ErrInvalidManifest) {
					t.Fatalf("rejection %T is not a *ManifestError: %v", err, err)
				}
				if !strings.HasPrefix(err.Error(), "podsource: file /m/fuzz.yaml: ") {
					t.Fatalf("error does not name the file: %v", err)
				}
				return
			}
			for _, p := range pods {
				if p.Spec.NodeName != "fuzz-node" || p.Annotations[ConfigHashAnnotation] != string(p.UID) || p.UID == "" ||
					!strings.HasSuffix(p.Name, "-fuzz-node") {
					t.Fatalf("accepted pod without static defaults: %+v", p.ObjectMeta)
				}
				if errs := ValidateStaticPod(p); len(errs) > 0 {
					t.Fatalf("accepted pod fails validation: %v", errs)
				}
			}
		}
		pod, err := DecodeManifest(data, origin)
		if err == nil {
			check([]*v1.Pod{pod}, nil)
		} else {
			check(nil, err)
		}
		pods, err := DecodeManifestList(data, origin)
		check(pods, err)
	})
}
