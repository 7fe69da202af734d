package admission

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReasonPodFeatureUnsupported is kubelet's reason for a pod that needs what
// the node lacks; Unsupported rejects with it.
const ReasonPodFeatureUnsupported = "PodFeatureUnsupported"

// ErrUnsupported is wrapped by UnsupportedField's errors.
var ErrUnsupported = errors.New("unsupported pod field")

// Unsupported rejects, with ReasonPodFeatureUnsupported, a pod that uses a
// field the kubelet acts on and nodekit does not implement; the message
// names the field (UnsupportedField). The zero value is ready to use.
type Unsupported struct{}

var _ Admitter = Unsupported{}

// Admit rejects pod when UnsupportedField finds a field.
func (Unsupported) Admit(pod *corev1.Pod, _ []*corev1.Pod) Result {
	if err := UnsupportedField(pod, nil); err != nil {
		return Result{Reason: ReasonPodFeatureUnsupported, Message: err.Error()}
	}
	return Admitted
}

// UnsupportedField returns an error (wrapping ErrUnsupported) naming the
// first field of pod that the kubelet acts on and nodekit does not
// implement, such as "spec.resourceClaims is not supported by this node:
// nodekit does not implement dynamic resource allocation"; nil when there
// is none.
// With c set, the pod-level fields and c's are checked (a container added
// after admission, an ephemeral container); else every container's.
func UnsupportedField(pod *corev1.Pod, c *corev1.Container) error {
	spec := field.NewPath("spec")
	ps := &pod.Spec
	if len(ps.ResourceClaims) > 0 {
		return refuse("PodSpec.resourceClaims", spec.Child("resourceClaims"), "")
	}
	for i := range ps.Volumes {
		if err := unsupportedVolume(&ps.Volumes[i], spec.Child("volumes").Index(i)); err != nil {
			return err
		}
	}
	if c != nil {
		return unsupportedContainer(c, containerPath(pod, c))
	}
	for i := range ps.InitContainers {
		if err := unsupportedContainer(&ps.InitContainers[i], spec.Child("initContainers").Index(i)); err != nil {
			return err
		}
	}
	for i := range ps.Containers {
		if err := unsupportedContainer(&ps.Containers[i], spec.Child("containers").Index(i)); err != nil {
			return err
		}
	}
	for i := range ps.EphemeralContainers {
		ec := corev1.Container(ps.EphemeralContainers[i].EphemeralContainerCommon)
		if err := unsupportedContainer(&ec, spec.Child("ephemeralContainers").Index(i)); err != nil {
			return err
		}
	}
	return nil
}

// containerPath is c's path in pod's spec, found by name.
func containerPath(pod *corev1.Pod, c *corev1.Container) *field.Path {
	spec := field.NewPath("spec")
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return spec.Child("initContainers").Index(i)
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == c.Name {
			return spec.Child("containers").Index(i)
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == c.Name {
			return spec.Child("ephemeralContainers").Index(i)
		}
	}
	return spec.Child("containers").Key(c.Name)
}

func unsupportedContainer(c *corev1.Container, p *field.Path) error {
	if len(c.Resources.Claims) > 0 {
		return refuse("ResourceRequirements.claims", p.Child("resources", "claims"), "")
	}
	if len(c.VolumeDevices) > 0 {
		return refuse("Container.volumeDevices", p.Child("volumeDevices"), "")
	}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		return refuse("Lifecycle.stopSignal", p.Child("lifecycle", "stopSignal"), string(*c.Lifecycle.StopSignal))
	}
	for i := range c.VolumeMounts {
		vm := &c.VolumeMounts[i]
		vp := p.Child("volumeMounts").Index(i)
		if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == corev1.RecursiveReadOnlyEnabled {
			return refuse("VolumeMount.recursiveReadOnly", vp.Child("recursiveReadOnly"), string(*vm.RecursiveReadOnly))
		}
		if len(vm.BindMountOptions) > 0 {
			return refuse("VolumeMount.bindMountOptions", vp.Child("bindMountOptions"), "")
		}
	}
	return nil
}

// unsupportedVolume refuses a volume whose source nodekit does not serve:
// every VolumeSource field the table calls refused, found by reflection so
// that a source added to the API is refused once the table names it; and
// projected sources and emptyDir media nodekit does not serve.
func unsupportedVolume(v *corev1.Volume, p *field.Path) error {
	src := reflect.ValueOf(&v.VolumeSource).Elem()
	for i := 0; i < src.NumField(); i++ {
		if src.Field(i).IsNil() {
			continue
		}
		name := jsonName(src.Type().Field(i))
		key := "VolumeSource." + name
		if r, ok := fieldTable[key]; !ok || r.class != refused {
			continue
		}
		return refuse(key, p.Child(name), "")
	}
	if ed := v.EmptyDir; ed != nil && strings.HasPrefix(string(ed.Medium), string(corev1.StorageMediumHugePages)) {
		return refuse("EmptyDirVolumeSource.medium", p.Child("emptyDir", "medium"), string(ed.Medium))
	}
	if ed := v.EmptyDir; ed != nil && ed.Mode != nil {
		return refuse("EmptyDirVolumeSource.mode", p.Child("emptyDir", "mode"), "")
	}
	if pr := v.Projected; pr != nil {
		if pr.DefaultUser != nil {
			return refuse("ProjectedVolumeSource.defaultUser", p.Child("projected", "defaultUser"), "")
		}
		for i, s := range pr.Sources {
			sp := p.Child("projected", "sources").Index(i)
			switch {
			case s.ClusterTrustBundle != nil:
				return refuse("VolumeProjection.clusterTrustBundle", sp.Child("clusterTrustBundle"), "")
			case s.PodCertificate != nil:
				return refuse("VolumeProjection.podCertificate", sp.Child("podCertificate"), "")
			}
		}
	}
	return nil
}

// refuse is the error for the refused field key at path (with value, when
// it is what is refused).
func refuse(key string, path *field.Path, value string) error {
	r := fieldTable[key]
	what := path.String()
	if value != "" {
		what += ": " + value
	}
	return unsupportedError(fmt.Sprintf("%s is not supported by this node: %s", what, r.note))
}

// unsupportedError is UnsupportedField's error: its message alone, as the
// pod's status shows it, and errors.Is ErrUnsupported.
type unsupportedError string

func (e unsupportedError) Error() string        { return string(e) }
func (e unsupportedError) Is(target error) bool { return target == ErrUnsupported }

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// fieldClass is what nodekit does with a field of the pod API.
type fieldClass int

const (
	// implemented: nodekit acts on it as the kubelet does (the note says
	// where, or how it differs).
	implemented fieldClass = iota + 1
	// refused: a pod setting it (as the refusal code checks) is rejected
	// with a message naming the field and the note.
	refused
	// notNodeConcern: no node agent acts on it (the scheduler, the API
	// server or controllers do), or the kubelet ignores it on this node.
	notNodeConcern
)

type fieldRule struct {
	class fieldClass
	note  string
}

// fieldTable classifies every field of the pod API types a node acts on,
// by "<Go type>.<JSON name>": PodSpec, Container (an ephemeral container's
// fields are a Container's), EphemeralContainer, PodSecurityContext,
// SecurityContext, VolumeMount, ResourceRequirements, Lifecycle, Volume,
// VolumeSource, EmptyDirVolumeSource, ProjectedVolumeSource and
// VolumeProjection. A test walks
// those types and fails on a field the table does not name, so a field
// added to the API is never silently ignored.
var fieldTable = map[string]fieldRule{
	// PodSpec.
	"PodSpec.volumes":                       {implemented, "podsync/cri (emptyDir, hostPath) and podsync/volume (secret, configMap, downwardAPI, projected); other sources refused (VolumeSource)"},
	"PodSpec.initContainers":                {implemented, "podsync's planner and podsync/cri"},
	"PodSpec.containers":                    {implemented, "podsync's planner and podsync/cri"},
	"PodSpec.ephemeralContainers":           {implemented, "podsync's planner and podsync/cri"},
	"PodSpec.restartPolicy":                 {implemented, "podsync's planner"},
	"PodSpec.terminationGracePeriodSeconds": {implemented, "podsync.PodGracePeriod"},
	"PodSpec.activeDeadlineSeconds":         {implemented, "podsync's engine: DeadlineExceeded"},
	"PodSpec.dnsPolicy":                     {implemented, "podsync/cri's DNS config"},
	"PodSpec.nodeSelector":                  {implemented, "Predicates (NodeAffinity)"},
	"PodSpec.serviceAccountName":            {implemented, "podsync/volume's tokens and the spec.serviceAccountName fieldRef"},
	"PodSpec.serviceAccount":                {notNodeConcern, "deprecated alias of serviceAccountName, which the API server sets"},
	"PodSpec.automountServiceAccountToken":  {notNodeConcern, "the API server's ServiceAccount admission adds the token volume"},
	"PodSpec.nodeName":                      {implemented, "Predicates (NodeName)"},
	"PodSpec.hostNetwork":                   {implemented, "podsync/cri's namespace options"},
	"PodSpec.hostPID":                       {implemented, "podsync/cri's namespace options"},
	"PodSpec.hostIPC":                       {implemented, "podsync/cri's namespace options"},
	"PodSpec.shareProcessNamespace":         {implemented, "podsync/cri's namespace options"},
	"PodSpec.securityContext":               {implemented, "PodSecurityContext"},
	"PodSpec.imagePullSecrets":              {implemented, "podsync/volume's pull credentials"},
	"PodSpec.hostname":                      {implemented, "podsync/cri's sandbox hostname"},
	"PodSpec.subdomain":                     {implemented, "podsync/cri's hostname and hosts file"},
	"PodSpec.affinity":                      {implemented, "Predicates (required node affinity); pod affinity is the scheduler's"},
	"PodSpec.schedulerName":                 {notNodeConcern, "the scheduler's"},
	"PodSpec.tolerations":                   {implemented, "Predicates (NoExecute taints)"},
	"PodSpec.hostAliases":                   {implemented, "podsync/cri's hosts file"},
	"PodSpec.priorityClassName":             {notNodeConcern, "the API server resolves it into priority"},
	"PodSpec.priority":                      {implemented, "critical-pod preemption and eviction ranking"},
	"PodSpec.dnsConfig":                     {implemented, "podsync/cri's DNS config"},
	"PodSpec.readinessGates":                {implemented, "podsync's status generator"},
	"PodSpec.runtimeClassName":              {implemented, "podsync/runtimeclass resolves it to the handler podsync/cri's RunPodSandbox gets; the API server's RuntimeClass admission copies the class's overhead into spec.overhead"},
	"PodSpec.enableServiceLinks":            {implemented, "podsync/volume's service environment variables"},
	"PodSpec.preemptionPolicy":              {notNodeConcern, "the scheduler's"},
	"PodSpec.overhead":                      {implemented, "admission requests and the pod cgroup (set from the RuntimeClass by the API server)"},
	"PodSpec.topologySpreadConstraints":     {notNodeConcern, "the scheduler's"},
	"PodSpec.setHostnameAsFQDN":             {implemented, "podsync/cri's sandbox hostname"},
	"PodSpec.os":                            {implemented, "Predicates (PodOSNotSupported)"},
	"PodSpec.hostUsers":                     {implemented, "podsync/cri: a user namespace of the pod's own (UserNamespaceOptions) when the runtime handler supports them"},
	"PodSpec.schedulingGates":               {notNodeConcern, "the scheduler's"},
	"PodSpec.resourceClaims":                {refused, "nodekit does not implement dynamic resource allocation"},
	"PodSpec.resources":                     {implemented, "admission requests, QoS class and the pod cgroup"},
	"PodSpec.hostnameOverride":              {implemented, "podsync/cri's sandbox hostname"},
	"PodSpec.schedulingGroup":               {notNodeConcern, "the scheduler's"},
	"PodSpec.evictionResponders":            {notNodeConcern, "the Eviction API's controllers"},

	// Container (and an ephemeral container's common fields).
	"Container.name":                     {implemented, "podsync/cri"},
	"Container.image":                    {implemented, "podsync/cri"},
	"Container.command":                  {implemented, "podsync/cri, $(VAR) expanded"},
	"Container.args":                     {implemented, "podsync/cri, $(VAR) expanded"},
	"Container.workingDir":               {implemented, "podsync/cri"},
	"Container.ports":                    {implemented, "podsync/cri's port mappings; Predicates (NodePorts)"},
	"Container.envFrom":                  {implemented, "podsync/volume's env (needs cri.Options.PodData)"},
	"Container.env":                      {implemented, "podsync/cri and podsync/volume"},
	"Container.resources":                {implemented, "ResourceRequirements"},
	"Container.resizePolicy":             {implemented, "consulted only by an in-place resize, which nodekit does not do (podsync/cri's differences)"},
	"Container.restartPolicy":            {implemented, "podsync's planner (sidecars)"},
	"Container.restartPolicyRules":       {implemented, "podsync's planner"},
	"Container.volumeMounts":             {implemented, "VolumeMount"},
	"Container.volumeDevices":            {refused, "nodekit does not serve raw block volumes"},
	"Container.livenessProbe":            {implemented, "probe"},
	"Container.readinessProbe":           {implemented, "probe"},
	"Container.startupProbe":             {implemented, "probe"},
	"Container.lifecycle":                {implemented, "Lifecycle"},
	"Container.terminationMessagePath":   {implemented, "podsync/cri"},
	"Container.terminationMessagePolicy": {implemented, "podsync/cri"},
	"Container.imagePullPolicy":          {implemented, "podsync/cri"},
	"Container.securityContext":          {implemented, "SecurityContext"},
	"Container.stdin":                    {implemented, "podsync/cri"},
	"Container.stdinOnce":                {implemented, "podsync/cri"},
	"Container.tty":                      {implemented, "podsync/cri"},

	"EphemeralContainer.targetContainerName": {implemented, "podsync/cri (the target's process namespace)"},

	"ResourceRequirements.limits":   {implemented, "podsync/cri's container resources and cgroups"},
	"ResourceRequirements.requests": {implemented, "admission, QoS class, podsync/cri's shares"},
	"ResourceRequirements.claims":   {refused, "nodekit does not implement dynamic resource allocation"},

	"Lifecycle.postStart":  {implemented, "podsync/cri's hooks"},
	"Lifecycle.preStop":    {implemented, "podsync/cri's hooks"},
	"Lifecycle.stopSignal": {refused, "nodekit does not pass stop signals (the alpha ContainerStopSignals feature)"},

	"VolumeMount.name":              {implemented, "podsync/cri"},
	"VolumeMount.readOnly":          {implemented, "podsync/cri"},
	"VolumeMount.recursiveReadOnly": {refused, "nodekit does not make recursive read-only mounts (IfPossible mounts read-only, not recursively)"},
	"VolumeMount.mountPath":         {implemented, "podsync/cri"},
	"VolumeMount.subPath":           {implemented, "podsync/cri"},
	"VolumeMount.mountPropagation":  {implemented, "podsync/cri"},
	"VolumeMount.subPathExpr":       {implemented, "podsync/cri"},
	"VolumeMount.bindMountOptions":  {refused, "nodekit does not pass bind mount options"},

	// PodSecurityContext.
	"PodSecurityContext.seLinuxOptions":           {implemented, "podsync/cri passes it to the sandbox and containers (volumes are not relabeled)"},
	"PodSecurityContext.windowsOptions":           {notNodeConcern, "Windows only; a Linux kubelet ignores it"},
	"PodSecurityContext.runAsUser":                {implemented, "podsync/cri"},
	"PodSecurityContext.runAsGroup":               {implemented, "podsync/cri"},
	"PodSecurityContext.runAsNonRoot":             {implemented, "podsync/cri (CreateContainerConfigError)"},
	"PodSecurityContext.supplementalGroups":       {implemented, "podsync/cri"},
	"PodSecurityContext.supplementalGroupsPolicy": {implemented, "podsync/cri; Predicates (SupplementalGroupsPolicyNotSupported)"},
	"PodSecurityContext.fsGroup":                  {implemented, "podsync/cri and podsync/volume"},
	"PodSecurityContext.sysctls":                  {implemented, "Sysctls (SysctlForbidden) and podsync/cri"},
	"PodSecurityContext.fsGroupChangePolicy":      {implemented, "the volumes nodekit serves are made with their ownership, so both policies give the same result"},
	"PodSecurityContext.seccompProfile":           {implemented, "podsync/cri"},
	"PodSecurityContext.appArmorProfile":          {implemented, "AppArmor and podsync/cri"},
	"PodSecurityContext.seLinuxChangePolicy":      {notNodeConcern, "chooses how volumes are relabeled on SELinux hosts; the kubelet ignores it elsewhere, and nodekit relabels no volumes (podsync/cri's differences)"},

	// SecurityContext.
	"SecurityContext.capabilities":             {implemented, "podsync/cri"},
	"SecurityContext.privileged":               {implemented, "podsync/cri"},
	"SecurityContext.seLinuxOptions":           {implemented, "podsync/cri"},
	"SecurityContext.windowsOptions":           {notNodeConcern, "Windows only; a Linux kubelet ignores it"},
	"SecurityContext.runAsUser":                {implemented, "podsync/cri"},
	"SecurityContext.runAsGroup":               {implemented, "podsync/cri"},
	"SecurityContext.runAsNonRoot":             {implemented, "podsync/cri (CreateContainerConfigError)"},
	"SecurityContext.readOnlyRootFilesystem":   {implemented, "podsync/cri"},
	"SecurityContext.allowPrivilegeEscalation": {implemented, "podsync/cri (no_new_privs)"},
	"SecurityContext.procMount":                {implemented, "podsync/cri (Unmasked: no masked or read-only paths)"},
	"SecurityContext.seccompProfile":           {implemented, "podsync/cri"},
	"SecurityContext.appArmorProfile":          {implemented, "AppArmor and podsync/cri"},

	// Volume sources: what nodekit serves, and what it refuses.
	"VolumeSource.hostPath":              {implemented, "podsync/cri"},
	"VolumeSource.emptyDir":              {implemented, "podsync/cri and podsync/volume (medium Memory)"},
	"VolumeSource.secret":                {implemented, "podsync/volume"},
	"VolumeSource.configMap":             {implemented, "podsync/volume"},
	"VolumeSource.downwardAPI":           {implemented, "podsync/volume"},
	"VolumeSource.projected":             {implemented, "podsync/volume (VolumeProjection)"},
	"VolumeSource.gcePersistentDisk":     {refused, volumeNote},
	"VolumeSource.awsElasticBlockStore":  {refused, volumeNote},
	"VolumeSource.gitRepo":               {refused, volumeNote},
	"VolumeSource.nfs":                   {refused, volumeNote},
	"VolumeSource.iscsi":                 {refused, volumeNote},
	"VolumeSource.glusterfs":             {refused, volumeNote},
	"VolumeSource.persistentVolumeClaim": {refused, volumeNote},
	"VolumeSource.rbd":                   {refused, volumeNote},
	"VolumeSource.flexVolume":            {refused, volumeNote},
	"VolumeSource.cinder":                {refused, volumeNote},
	"VolumeSource.cephfs":                {refused, volumeNote},
	"VolumeSource.flocker":               {refused, volumeNote},
	"VolumeSource.fc":                    {refused, volumeNote},
	"VolumeSource.azureFile":             {refused, volumeNote},
	"VolumeSource.vsphereVolume":         {refused, volumeNote},
	"VolumeSource.quobyte":               {refused, volumeNote},
	"VolumeSource.azureDisk":             {refused, volumeNote},
	"VolumeSource.photonPersistentDisk":  {refused, volumeNote},
	"VolumeSource.portworxVolume":        {refused, volumeNote},
	"VolumeSource.scaleIO":               {refused, volumeNote},
	"VolumeSource.storageos":             {refused, volumeNote},
	"VolumeSource.csi":                   {refused, volumeNote},
	"VolumeSource.ephemeral":             {refused, volumeNote},
	"VolumeSource.image":                 {refused, volumeNote},

	"EmptyDirVolumeSource.medium":    {refused, "nodekit does not mount hugetlbfs (medium \"\" and Memory are served)"},
	"EmptyDirVolumeSource.sizeLimit": {implemented, "podsync/eviction (local storage) and podsync/volume (tmpfs size)"},
	"EmptyDirVolumeSource.mode":      {refused, "nodekit makes emptyDir volumes 0777 (the alpha EmptyDirVolumeMode feature)"},

	"Volume.name": {implemented, "podsync/cri and podsync/volume"},

	"ProjectedVolumeSource.sources":     {implemented, "VolumeProjection"},
	"ProjectedVolumeSource.defaultMode": {implemented, "podsync/volume"},
	"ProjectedVolumeSource.defaultUser": {refused, "nodekit does not set the owner of projected files (the alpha AtomicWriteVolumeUserFields feature)"},

	"VolumeProjection.secret":              {implemented, "podsync/volume"},
	"VolumeProjection.downwardAPI":         {implemented, "podsync/volume"},
	"VolumeProjection.configMap":           {implemented, "podsync/volume"},
	"VolumeProjection.serviceAccountToken": {implemented, "podsync/volume"},
	"VolumeProjection.clusterTrustBundle":  {refused, "nodekit does not project ClusterTrustBundles"},
	"VolumeProjection.podCertificate":      {refused, "nodekit does not project pod certificates"},
}

const volumeNote = "nodekit serves emptyDir, hostPath, secret, configMap, downwardAPI and projected volumes only"
