package deploy

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The facts about agentd the manifests must agree with.
const (
	// containerName is agentd's container in the pod template.
	containerName = "agentd"
	// a2aPortName is the name of the A2A (SPIFFE mTLS) port on the container
	// and on the Service: "tls-" tells Istio the protocol is opaque TLS.
	a2aPortName = "tls-a2a"
	// healthPortName and metricsPortName name the other two ports.
	healthPortName  = "health"
	metricsPortName = "metrics"
	// spiffeCSIDriver is the SPIFFE CSI driver that mounts the Workload API.
	spiffeCSIDriver = "csi.spiffe.io"
	// spireAgentSocket is the socket's file name in the CSI volume.
	spireAgentSocket = "spire-agent.sock"
	// nonrootUID is the uid the image runs as (distroless "nonroot").
	nonrootUID = 65532
	// httpShutdown is how long agentd's serve waits for the HTTP server to
	// close after the drain (cmd/agentd/serve.go: drain).
	httpShutdown = 2 * time.Second
)

// pendingEnv are agentd settings whose flags other work in progress adds
// (identity/TLS, health listener, metrics, downward-API facts); they are
// accepted here before cmd/agentd mentions them.
var pendingEnv = []string{
	"AGENT_ALLOW_TRUST_DOMAIN", "AGENT_ALLOW_PEER", "AGENT_OPERATOR",
	"AGENT_HEALTH_LISTEN", "AGENT_METRICS_ADDR",
	"AGENT_POD_NAME", "AGENT_POD_NAMESPACE", "AGENT_NODE_NAME",
}

// forbiddenEnv must never be set on the serve container: AGENT_SUBAGENT
// selects subagent mode, the rest belong to one-shot runs or are secrets that
// must come from a file.
var forbiddenEnv = []string{"AGENT_SUBAGENT", "AGENT_INSTRUCTION", "AGENT_RUN_ID", "AGENT_MODE", "AGENT_INTELLIGENCE_KEY"}

// downwardEnv maps each downward-API variable to the pod field it carries.
var downwardEnv = map[string]string{
	"AGENT_POD_NAME":      "metadata.name",
	"AGENT_POD_NAMESPACE": "metadata.namespace",
	"AGENT_NODE_NAME":     "spec.nodeName",
}

// A check is one invariant across a rendered set of manifests.
type check struct {
	name string
	fn   func(*set) error
}

var checks = []check{
	{"labels and selectors", checkSelectors},
	{"namespaces", checkNamespaces},
	{"security context", checkSecurityContext},
	{"spiffe workload api", checkSPIFFEVolume},
	{"ports", checkPorts},
	{"probes", checkProbes},
	{"drain", checkDrain},
	{"public url", checkPublicURL},
	{"session affinity", checkAffinity},
	{"network policy", checkNetworkPolicy},
	{"disruption budget", checkPDB},
	{"cluster spiffe id", checkClusterSPIFFEID},
	{"service monitor", checkServiceMonitor},
	{"env", checkEnv},
	{"state directory", checkStateDir},
	{"image", checkImage},
}

// TestInvariants runs every check over every kustomization.
func TestInvariants(t *testing.T) {
	for _, dir := range kustomizations {
		s := load(t, dir)
		for _, c := range checks {
			t.Run(dir+"/"+c.name, func(t *testing.T) {
				if err := c.fn(s); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestInvariantsCatchBreakage proves the checks can fail: each case breaks
// the rendered base in one way and expects the named check to say so.
func TestInvariantsCatchBreakage(t *testing.T) {
	cases := []struct {
		check  string
		breakg func(s *set)
	}{
		{"drain", func(s *set) { s.deployments[0].Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(25)) }},
		{"drain", func(s *set) { setEnv(agentd(s), "AGENT_DRAIN_TIMEOUT", "60s") }},
		{"probes", func(s *set) { agentd(s).ReadinessProbe.HTTPGet.Port = intstr.FromString(a2aPortName) }},
		{"probes", func(s *set) { agentd(s).LivenessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP }},
		{"probes", func(s *set) { setEnv(agentd(s), "AGENT_HEALTH_LISTEN", "0.0.0.0:9444") }},
		{"ports", func(s *set) { mustA2A(s).Spec.Ports[0].Name = "https" }},
		{"ports", func(s *set) { mustA2A(s).Spec.Ports[0].AppProtocol = ptr("http") }},
		{"ports", func(s *set) { setEnv(agentd(s), "AGENT_LISTEN", "0.0.0.0:8080") }},
		{"labels and selectors", func(s *set) { mustA2A(s).Spec.Selector["app.kubernetes.io/instance"] = "other" }},
		{"labels and selectors", func(s *set) { s.pdbs[0].Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "x" }},
		{"namespaces", func(s *set) { s.pdbs[0].Namespace = "default" }},
		{"namespaces", func(s *set) { s.spiffeIDs[0].Namespace = "agentd" }},
		{"security context", func(s *set) { agentd(s).SecurityContext.ReadOnlyRootFilesystem = ptr(false) }},
		{"security context", func(s *set) { s.serviceAccounts[0].AutomountServiceAccountToken = nil }},
		{"spiffe workload api", func(s *set) { setEnv(agentd(s), "SPIFFE_ENDPOINT_SOCKET", "unix:///run/spire/agent.sock") }},
		{"spiffe workload api", func(s *set) { agentd(s).VolumeMounts[0].ReadOnly = false }},
		{"session affinity", func(s *set) { setEnv(agentd(s), "AGENT_TASK_RETENTION", "24h") }},
		{"network policy", func(s *set) { s.netpols[0].Spec.Ingress = s.netpols[0].Spec.Ingress[1:] }},
		{"disruption budget", func(s *set) { s.deployments[0].Spec.Replicas = ptr(int32(1)) }},
		{"cluster spiffe id", func(s *set) { s.spiffeIDs[0].Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] = "x" }},
		{"cluster spiffe id", func(s *set) { s.spiffeIDs[0].Spec.SPIFFEIDTemplate = "spiffe://{{ .TrustDomain }}/agentd" }},
		{"cluster spiffe id", func(s *set) { s.spiffeIDs[0].Spec.SPIFFEIDTemplate = "spiffe://{{ .TrustDomian }}/x" }},
		{"service monitor", func(s *set) { s.monitors[0].Spec.Endpoints[0].Port = "http-metrics" }},
		{"env", func(s *set) { setEnv(agentd(s), "AGENT_DRAIN_TIMOUT", "25s") }},
		{"state directory", func(s *set) { setEnv(agentd(s), "AGENT_STATE_DIR", "/home/nonroot/state") }},
		{"state directory", func(s *set) {
			c := agentd(s)
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "state" })
		}},
		{"state directory", func(s *set) { setEnv(agentd(s), "AGENT_STORE", "postgres") }},
		{"env", func(s *set) { setEnv(agentd(s), "AGENT_SUBAGENT", "1") }},
		{"env", func(s *set) { setEnv(agentd(s), "AGENT_PUBLIC_URL", "https://$(LATER):8443/") }},
		{"public url", func(s *set) { setEnv(agentd(s), "AGENT_PUBLIC_URL", "http://agentd.agentd.svc.cluster.local:8443/") }},
		{"image", func(s *set) { agentd(s).Image = "agentd:latest" }},
	}
	for _, tc := range cases {
		var fn func(*set) error
		for _, c := range checks {
			if c.name == tc.check {
				fn = c.fn
			}
		}
		if fn == nil {
			t.Fatalf("no check named %q", tc.check)
		}
		s := load(t, "k8s/base")
		if err := fn(s); err != nil {
			t.Fatalf("%s fails on the unbroken base: %v", tc.check, err)
		}
		tc.breakg(s)
		if err := fn(s); err == nil {
			t.Errorf("check %q passed a broken base", tc.check)
		} else {
			t.Logf("%s: %v", tc.check, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// mustA2A is a2aService for tests that break a valid set.
func mustA2A(s *set) *corev1.Service {
	svc, err := a2aService(s)
	if err != nil {
		panic(err)
	}
	return svc
}

// setEnv sets name to a literal value, adding it at the end if absent.
func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value, c.Env[i].ValueFrom = value, nil
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

// deployment is the one agentd Deployment of s.
func deployment(s *set) *appsv1.Deployment { return s.deployments[0] }

// podSpec is its pod template's spec.
func podSpec(s *set) *corev1.PodSpec { return &deployment(s).Spec.Template.Spec }

// agentd is the agentd container.
func agentd(s *set) *corev1.Container {
	for i := range podSpec(s).Containers {
		if c := &podSpec(s).Containers[i]; c.Name == containerName {
			return c
		}
	}
	return &corev1.Container{Name: "missing"}
}

// env returns the literal value of name on c.
func env(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// envDuration reads a required duration setting.
func envDuration(c *corev1.Container, name string) (time.Duration, error) {
	v, ok := env(c, name)
	if !ok {
		return 0, fmt.Errorf("%s is not set on the container", name)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", name, v, err)
	}
	return d, nil
}

// envPort reads the port of a required host:port setting.
func envPort(c *corev1.Container, name string) (int32, error) {
	v, ok := env(c, name)
	if !ok {
		return 0, fmt.Errorf("%s is not set on the container", name)
	}
	_, p, err := net.SplitHostPort(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", name, v, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%s=%q: bad port", name, v)
	}
	return int32(n), nil
}

// containerPort returns the number of the container port called name.
func containerPort(c *corev1.Container, name string) (int32, error) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, name)
}

// resolvePort resolves a port reference (a name or a number) against the
// container's declared ports.
func resolvePort(c *corev1.Container, ref intstr.IntOrString) (int32, error) {
	if ref.Type == intstr.String {
		return containerPort(c, ref.StrVal)
	}
	for _, p := range c.Ports {
		if p.ContainerPort == ref.IntVal {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("container %s declares no port %d", c.Name, ref.IntVal)
}

// selects reports whether sel matches the labels; a nil or empty selector is
// an error here (it would select every pod).
func selects(sel *metav1.LabelSelector, l map[string]string) (bool, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false, errors.New("empty selector")
	}
	ls, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return ls.Matches(labels.Set(l)), nil
}

// a2aService is the load-balanced A2A Service (the one with a cluster IP).
func a2aService(s *set) (*corev1.Service, error) {
	for _, svc := range s.services {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == a2aPortName {
				return svc, nil
			}
		}
	}
	return nil, fmt.Errorf("no Service has a port named %q", a2aPortName)
}

func checkSelectors(s *set) error {
	d := deployment(s)
	pod := d.Spec.Template.Labels
	var errs []error
	match := func(what string, sel *metav1.LabelSelector) {
		ok, err := selects(sel, pod)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", what, err))
		} else if !ok {
			errs = append(errs, fmt.Errorf("%s %v does not select the pod labels %v", what, sel.MatchLabels, pod))
		}
	}
	match("Deployment selector", d.Spec.Selector)
	for _, svc := range s.services {
		match("Service "+svc.Name+" selector", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	}
	for _, p := range s.pdbs {
		match("PodDisruptionBudget "+p.Name+" selector", p.Spec.Selector)
	}
	for _, np := range s.netpols {
		match("NetworkPolicy "+np.Name+" podSelector", &np.Spec.PodSelector)
	}
	for _, id := range s.spiffeIDs {
		match("ClusterSPIFFEID "+id.Name+" podSelector", id.Spec.PodSelector)
	}
	for _, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
		match("topologySpreadConstraint", tsc.LabelSelector)
	}
	// Every label on every object is a valid Kubernetes label.
	all := map[string]map[string]string{"pod template": pod}
	for _, o := range objectMetas(s) {
		all[o.kind+" "+o.meta.Name] = o.meta.Labels
	}
	for what, l := range all {
		for k, v := range l {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, fmt.Errorf("%s: label key %q: %s", what, k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, fmt.Errorf("%s: label %s value %q: %s", what, k, v, msg))
			}
		}
	}
	return errors.Join(errs...)
}

type kindMeta struct {
	kind string
	meta *metav1.ObjectMeta
}

// objectMetas lists the metadata of every object in s.
func objectMetas(s *set) []kindMeta {
	var out []kindMeta
	for _, o := range s.namespaces {
		out = append(out, kindMeta{"Namespace", &o.ObjectMeta})
	}
	for _, o := range s.serviceAccounts {
		out = append(out, kindMeta{"ServiceAccount", &o.ObjectMeta})
	}
	for _, o := range s.services {
		out = append(out, kindMeta{"Service", &o.ObjectMeta})
	}
	for _, o := range s.deployments {
		out = append(out, kindMeta{"Deployment", &o.ObjectMeta})
	}
	for _, o := range s.netpols {
		out = append(out, kindMeta{"NetworkPolicy", &o.ObjectMeta})
	}
	for _, o := range s.pdbs {
		out = append(out, kindMeta{"PodDisruptionBudget", &o.ObjectMeta})
	}
	for _, o := range s.spiffeIDs {
		out = append(out, kindMeta{"ClusterSPIFFEID", &o.ObjectMeta})
	}
	for _, o := range s.monitors {
		out = append(out, kindMeta{"ServiceMonitor", &o.ObjectMeta})
	}
	return out
}

func checkNamespaces(s *set) error {
	ns := s.namespaces[0].Name
	var errs []error
	for _, o := range objectMetas(s) {
		for _, msg := range validation.IsDNS1123Label(o.meta.Name) {
			errs = append(errs, fmt.Errorf("%s name %q: %s", o.kind, o.meta.Name, msg))
		}
		switch {
		case clusterScoped[o.kind] && o.meta.Namespace != "":
			errs = append(errs, fmt.Errorf("%s %s is cluster-scoped but has namespace %q", o.kind, o.meta.Name, o.meta.Namespace))
		case !clusterScoped[o.kind] && o.meta.Namespace != ns:
			errs = append(errs, fmt.Errorf("%s %s is in namespace %q, want %q", o.kind, o.meta.Name, o.meta.Namespace, ns))
		}
	}
	sa := podSpec(s).ServiceAccountName
	if !slices.ContainsFunc(s.serviceAccounts, func(a *corev1.ServiceAccount) bool { return a.Name == sa }) {
		errs = append(errs, fmt.Errorf("the pod's ServiceAccount %q is not among the manifests", sa))
	}
	return errors.Join(errs...)
}

func checkSecurityContext(s *set) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ps := podSpec(s)
	psc := ps.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		fail("pod securityContext.runAsNonRoot is not true")
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != nonrootUID {
		fail("pod securityContext.runAsUser is not %d (the image's user)", nonrootUID)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail("pod seccompProfile is not RuntimeDefault")
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		fail("pod automountServiceAccountToken is not false")
	}
	for _, sa := range s.serviceAccounts {
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			fail("ServiceAccount %s automountServiceAccountToken is not false", sa.Name)
		}
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		fail("pod shares a host namespace")
	}
	for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			fail("container %s has no securityContext", c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			fail("container %s allowPrivilegeEscalation is not false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			fail("container %s readOnlyRootFilesystem is not true", c.Name)
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			fail("container %s runAsNonRoot is not true", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			fail("container %s is privileged", c.Name)
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			fail("container %s does not drop exactly ALL capabilities and add none", c.Name)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			fail("container %s seccompProfile is not RuntimeDefault", c.Name)
		}
	}
	// A read-only root needs a writable /tmp, from an emptyDir.
	c := agentd(s)
	tmp := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" })
	if tmp < 0 {
		fail("container %s mounts nothing at /tmp", c.Name)
	} else {
		name := c.VolumeMounts[tmp].Name
		v := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == name })
		if v < 0 || ps.Volumes[v].EmptyDir == nil {
			fail("/tmp is not an emptyDir volume")
		}
		if c.VolumeMounts[tmp].ReadOnly {
			fail("/tmp is mounted read-only")
		}
	}
	return errors.Join(errs...)
}

// checkStateDir: the task store's state directory is a writable volume of
// its own (the root filesystem is read-only), unless the store is PostgreSQL.
func checkStateDir(s *set) error {
	c, ps := agentd(s), podSpec(s)
	if kind, _ := env(c, "AGENT_STORE"); kind == "postgres" {
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "AGENT_STORE_DSN_FILE" || e.Name == "AGENT_STORE_DSN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
		}) {
			return errors.New("AGENT_STORE is postgres without AGENT_STORE_DSN from a Secret or AGENT_STORE_DSN_FILE")
		}
		return nil
	}
	dir, ok := env(c, "AGENT_STATE_DIR")
	if !ok || dir == "" {
		return errors.New("AGENT_STATE_DIR is not set: the default per-user directory is on the read-only root")
	}
	m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if m < 0 {
		return fmt.Errorf("AGENT_STATE_DIR %s is not a volume mount", dir)
	}
	if c.VolumeMounts[m].ReadOnly {
		return fmt.Errorf("the state directory %s is mounted read-only", dir)
	}
	if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[m].Name }) {
		return fmt.Errorf("the state directory's volume %s is not declared", c.VolumeMounts[m].Name)
	}
	return nil
}

func checkSPIFFEVolume(s *set) error {
	ps, c := podSpec(s), agentd(s)
	vi := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.CSI != nil && v.CSI.Driver == spiffeCSIDriver })
	if vi < 0 {
		return fmt.Errorf("no CSI volume with driver %s", spiffeCSIDriver)
	}
	v := ps.Volumes[vi]
	var errs []error
	if v.CSI.ReadOnly == nil || !*v.CSI.ReadOnly {
		errs = append(errs, fmt.Errorf("volume %s: csi.readOnly is not true", v.Name))
	}
	mi := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name })
	if mi < 0 {
		return errors.Join(append(errs, fmt.Errorf("container %s does not mount volume %s", c.Name, v.Name))...)
	}
	m := c.VolumeMounts[mi]
	if !m.ReadOnly {
		errs = append(errs, fmt.Errorf("volume %s is mounted read-write", v.Name))
	}
	want := "unix://" + filepath.Join(m.MountPath, spireAgentSocket)
	if got, _ := env(c, "SPIFFE_ENDPOINT_SOCKET"); got != want {
		errs = append(errs, fmt.Errorf("SPIFFE_ENDPOINT_SOCKET=%q, want %q (the socket in the CSI mount)", got, want))
	}
	return errors.Join(errs...)
}

func checkPorts(s *set) error {
	c := agentd(s)
	var errs []error
	want := map[string]string{a2aPortName: "AGENT_LISTEN", healthPortName: "AGENT_HEALTH_LISTEN", metricsPortName: "AGENT_METRICS_ADDR"}
	seen := map[int32]string{}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		cp, err := containerPort(c, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ep, err := envPort(c, want[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cp != ep {
			errs = append(errs, fmt.Errorf("container port %s is %d but %s listens on %d", name, cp, want[name], ep))
		}
		if other, dup := seen[cp]; dup {
			errs = append(errs, fmt.Errorf("ports %s and %s are both %d", name, other, cp))
		}
		seen[cp] = name
	}
	if len(c.Ports) != len(want) {
		errs = append(errs, fmt.Errorf("container declares %d ports, want exactly %v", len(c.Ports), slices.Sorted(maps.Keys(want))))
	}
	for _, p := range c.Ports {
		for _, msg := range validation.IsValidPortName(p.Name) {
			errs = append(errs, fmt.Errorf("container port name %q: %s", p.Name, msg))
		}
	}
	for _, svc := range s.services {
		for _, p := range svc.Spec.Ports {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, fmt.Errorf("Service %s port name %q: %s", svc.Name, p.Name, msg))
			}
			if _, err := resolvePort(c, p.TargetPort); err != nil {
				errs = append(errs, fmt.Errorf("Service %s port %s targetPort: %v", svc.Name, p.Name, err))
			}
			if p.Name == a2aPortName {
				if p.AppProtocol == nil || *p.AppProtocol != "tls" {
					errs = append(errs, fmt.Errorf("Service %s port %s: appProtocol is not tls", svc.Name, p.Name))
				}
				a2aPort, _ := containerPort(c, a2aPortName)
				if tp, _ := resolvePort(c, p.TargetPort); tp != a2aPort {
					errs = append(errs, fmt.Errorf("Service %s port %s does not target the A2A port", svc.Name, p.Name))
				}
			}
		}
	}
	if _, err := a2aService(s); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkProbes(s *set) error {
	c := agentd(s)
	healthPort, err := envPort(c, "AGENT_HEALTH_LISTEN")
	if err != nil {
		return err
	}
	a2aPort, _ := envPort(c, "AGENT_LISTEN")
	var errs []error
	probes := []struct {
		kind string
		p    *corev1.Probe
		path string
	}{
		{"startupProbe", c.StartupProbe, "/healthz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	}
	for _, pr := range probes {
		if pr.p == nil || pr.p.HTTPGet == nil {
			errs = append(errs, fmt.Errorf("%s is not an httpGet probe", pr.kind))
			continue
		}
		g := pr.p.HTTPGet
		if g.Path != pr.path {
			errs = append(errs, fmt.Errorf("%s path %q, want %q", pr.kind, g.Path, pr.path))
		}
		if g.Scheme != corev1.URISchemeHTTPS {
			errs = append(errs, fmt.Errorf("%s scheme %q, want HTTPS (the health listener serves TLS with the SVID)", pr.kind, g.Scheme))
		}
		if g.Host != "" {
			errs = append(errs, fmt.Errorf("%s sets host %q", pr.kind, g.Host))
		}
		port, err := resolvePort(c, g.Port)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %v", pr.kind, err))
		case port != healthPort:
			errs = append(errs, fmt.Errorf("%s probes port %d, but AGENT_HEALTH_LISTEN is on %d", pr.kind, port, healthPort))
		}
	}
	if healthPort == a2aPort {
		errs = append(errs, fmt.Errorf("the health listener shares the A2A port %d (kubelet has no client certificate)", a2aPort))
	}
	return errors.Join(errs...)
}

func checkDrain(s *set) error {
	c, d := agentd(s), deployment(s)
	drain, err := envDuration(c, "AGENT_DRAIN_TIMEOUT")
	if err != nil {
		return err
	}
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		h := c.Lifecycle.PreStop
		if h.Sleep == nil || h.Exec != nil || h.HTTPGet != nil || h.TCPSocket != nil {
			return errors.New("preStop must be a sleep action (the image has no shell)")
		}
		preStop = time.Duration(h.Sleep.Seconds) * time.Second
	}
	gp := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if gp == nil {
		return errors.New("terminationGracePeriodSeconds is not set (the default 30s is not derived from the drain)")
	}
	grace := time.Duration(*gp) * time.Second
	var errs []error
	if need := preStop + drain + httpShutdown; grace <= need {
		errs = append(errs, fmt.Errorf("terminationGracePeriodSeconds %s is not above preStop %s + AGENT_DRAIN_TIMEOUT %s + HTTP shutdown %s = %s", grace, preStop, drain, httpShutdown, need))
	}
	st := d.Spec.Strategy
	if st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate == nil ||
		st.RollingUpdate.MaxUnavailable == nil || st.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		errs = append(errs, errors.New("rollout must be RollingUpdate with maxUnavailable 0 (a new replica is ready before an old one drains)"))
	}
	return errors.Join(errs...)
}

// checkPublicURL: the card's URL is https and reaches this service's A2A
// port, either through a Service's DNS name or as the pod's own IP.
func checkPublicURL(s *set) error {
	c := agentd(s)
	raw, ok := env(c, "AGENT_PUBLIC_URL")
	if !ok {
		return errors.New("AGENT_PUBLIC_URL is not set (the card would carry the 0.0.0.0 listen address)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("AGENT_PUBLIC_URL=%q: %v", raw, err)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("AGENT_PUBLIC_URL=%q is not https", raw)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("AGENT_PUBLIC_URL=%q has no port", raw)
	}
	a2aPort, err := envPort(c, "AGENT_LISTEN")
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "$(POD_IP)" {
		if int32(port) != a2aPort {
			return fmt.Errorf("AGENT_PUBLIC_URL=%q: the pod listens on %d", raw, a2aPort)
		}
		return nil
	}
	for _, svc := range s.services {
		prefix := svc.Name + "." + svc.Namespace + ".svc"
		if host != prefix && !strings.HasPrefix(host, prefix+".") {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.Port == int32(port) {
				if tp, err := resolvePort(c, p.TargetPort); err == nil && tp == a2aPort {
					return nil
				}
			}
		}
		return fmt.Errorf("AGENT_PUBLIC_URL=%q: Service %s has no port %d targeting the A2A port", raw, svc.Name, port)
	}
	return fmt.Errorf("AGENT_PUBLIC_URL=%q names no Service of these manifests and is not the pod IP", raw)
}

// checkAffinity: tasks live in the replica that took them, so the A2A
// Service keeps a caller on one replica for as long as a task can be read:
// its deadline plus the retention of a finished task.
func checkAffinity(s *set) error {
	svc, err := a2aService(s)
	if err != nil {
		return err
	}
	if kind, _ := env(agentd(s), "AGENT_STORE"); kind == "postgres" {
		// One database behind every replica: any of them answers for any
		// task, and affinity would only unbalance the load.
		if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			return fmt.Errorf("Service %s keeps ClientIP affinity although the replicas share PostgreSQL", svc.Name)
		}
		return nil
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return fmt.Errorf("Service %s sessionAffinity is %q, want ClientIP (tasks/get must reach the replica that owns the task)", svc.Name, svc.Spec.SessionAffinity)
	}
	cfg := svc.Spec.SessionAffinityConfig
	if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
		return fmt.Errorf("Service %s: sessionAffinityConfig.clientIP.timeoutSeconds is not set", svc.Name)
	}
	c := agentd(s)
	deadline, err := envDuration(c, "AGENT_DEADLINE")
	if err != nil {
		return err
	}
	retention, err := envDuration(c, "AGENT_TASK_RETENTION")
	if err != nil {
		return err
	}
	timeout := time.Duration(*cfg.ClientIP.TimeoutSeconds) * time.Second
	if timeout < deadline+retention {
		return fmt.Errorf("Service %s affinity timeout %s is shorter than AGENT_DEADLINE %s + AGENT_TASK_RETENTION %s", svc.Name, timeout, deadline, retention)
	}
	return nil
}

func checkNetworkPolicy(s *set) error {
	c := agentd(s)
	np := s.netpols[0]
	var errs []error
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
		errs = append(errs, fmt.Errorf("NetworkPolicy %s policyTypes %v, want Ingress and Egress", np.Name, np.Spec.PolicyTypes))
	}
	admitted := map[int32]bool{}
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if p.Port == nil {
				continue
			}
			n, err := resolvePort(c, *p.Port)
			if err != nil {
				errs = append(errs, fmt.Errorf("NetworkPolicy %s ingress: %v", np.Name, err))
				continue
			}
			admitted[n] = true
		}
	}
	for _, name := range []string{a2aPortName, metricsPortName} {
		if n, err := containerPort(c, name); err == nil && !admitted[n] {
			errs = append(errs, fmt.Errorf("NetworkPolicy %s admits no ingress to port %s (%d)", np.Name, name, n))
		}
	}
	dns := false
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			if p.Port != nil && p.Port.IntValue() == 53 && p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP {
				dns = true
			}
		}
	}
	if !dns {
		errs = append(errs, fmt.Errorf("NetworkPolicy %s admits no DNS egress (UDP 53)", np.Name))
	}
	return errors.Join(errs...)
}

func checkPDB(s *set) error {
	d, p := deployment(s), s.pdbs[0]
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas < 2 {
		return fmt.Errorf("Deployment has %d replica(s): a PodDisruptionBudget cannot keep the service up through an eviction", replicas)
	}
	switch {
	case p.Spec.MaxUnavailable != nil && p.Spec.MinAvailable == nil:
		if v := p.Spec.MaxUnavailable.IntValue(); p.Spec.MaxUnavailable.Type != intstr.Int || v < 1 || int32(v) >= replicas {
			return fmt.Errorf("PodDisruptionBudget maxUnavailable %s must be a number in [1, replicas-1]", p.Spec.MaxUnavailable.String())
		}
	case p.Spec.MinAvailable != nil && p.Spec.MaxUnavailable == nil:
		if v := p.Spec.MinAvailable.IntValue(); p.Spec.MinAvailable.Type != intstr.Int || v < 1 || int32(v) >= replicas {
			return fmt.Errorf("PodDisruptionBudget minAvailable %s must be a number in [1, replicas-1]", p.Spec.MinAvailable.String())
		}
	default:
		return errors.New("PodDisruptionBudget must set exactly one of maxUnavailable and minAvailable")
	}
	return nil
}

// checkClusterSPIFFEID renders the ID template the way spire-controller-
// manager does for an agentd pod, and checks that it selects the pods and
// their namespace and that the ID is one agentd's own allowlist accepts (so
// replicas may delegate to each other).
func checkClusterSPIFFEID(s *set) error {
	id, ns, d := s.spiffeIDs[0], s.namespaces[0], deployment(s)
	nsLabels := maps.Clone(ns.Labels)
	if nsLabels == nil {
		nsLabels = map[string]string{}
	}
	nsLabels["kubernetes.io/metadata.name"] = ns.Name // set by the API server
	if ok, err := selects(id.Spec.NamespaceSelector, nsLabels); err != nil || !ok {
		return fmt.Errorf("ClusterSPIFFEID %s namespaceSelector does not select namespace %s (%v)", id.Name, ns.Name, err)
	}
	if ok, err := selects(id.Spec.PodSelector, d.Spec.Template.Labels); err != nil || !ok {
		return fmt.Errorf("ClusterSPIFFEID %s podSelector does not select the agentd pods (%v)", id.Name, err)
	}
	td, ok := env(agentd(s), "AGENT_ALLOW_TRUST_DOMAIN")
	if !ok {
		return errors.New("AGENT_ALLOW_TRUST_DOMAIN is not set")
	}
	tmpl, err := template.New("spiffeIDTemplate").Option("missingkey=error").Parse(id.Spec.SPIFFEIDTemplate)
	if err != nil {
		return fmt.Errorf("ClusterSPIFFEID %s spiffeIDTemplate: %v", id.Name, err)
	}
	meta := d.Spec.Template.ObjectMeta
	meta.Namespace, meta.Name = d.Namespace, d.Name+"-0"
	var b strings.Builder
	if err := tmpl.Execute(&b, spiffeIDTemplateData{TrustDomain: td, ClusterName: "test", ClusterDomain: "cluster.local", PodMeta: &meta, PodSpec: &d.Spec.Template.Spec, NodeMeta: &metav1.ObjectMeta{Name: "node"}, NodeSpec: &corev1.NodeSpec{}}); err != nil {
		return fmt.Errorf("ClusterSPIFFEID %s spiffeIDTemplate: %v", id.Name, err)
	}
	got := b.String()
	want := fmt.Sprintf("spiffe://%s/ns/%s/sa/%s", td, d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if got != want {
		return fmt.Errorf("ClusterSPIFFEID %s renders %q for an agentd pod, want %q", id.Name, got, want)
	}
	if err := checkSPIFFEID(got); err != nil {
		return err
	}
	return nil
}

// checkSPIFFEID checks the shape of a SPIFFE ID: spiffe://trust-domain/path,
// nothing else.
func checkSPIFFEID(id string) error {
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "spiffe" || u.Host == "" || u.Port() != "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Path == "" || u.Host != strings.ToLower(u.Host) {
		return fmt.Errorf("%q is not a SPIFFE ID (spiffe://trust-domain/path)", id)
	}
	return nil
}

func checkServiceMonitor(s *set) error {
	c := agentd(s)
	sm := s.monitors[0]
	var errs []error
	if !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, s.namespaces[0].Name) {
		errs = append(errs, fmt.Errorf("ServiceMonitor %s namespaceSelector does not name %s", sm.Name, s.namespaces[0].Name))
	}
	metricsPort, err := envPort(c, "AGENT_METRICS_ADDR")
	if err != nil {
		return err
	}
	var selected []*corev1.Service
	for _, svc := range s.services {
		if ok, err := selects(&sm.Spec.Selector, svc.Labels); err != nil {
			return fmt.Errorf("ServiceMonitor %s selector: %v", sm.Name, err)
		} else if ok {
			selected = append(selected, svc)
		}
	}
	if len(selected) != 1 {
		return errors.Join(append(errs, fmt.Errorf("ServiceMonitor %s selects %d Services, want exactly the metrics Service", sm.Name, len(selected)))...)
	}
	svc := selected[0]
	if len(sm.Spec.Endpoints) == 0 {
		errs = append(errs, fmt.Errorf("ServiceMonitor %s has no endpoints", sm.Name))
	}
	for _, ep := range sm.Spec.Endpoints {
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port })
		if i < 0 {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s scrapes port %q, which Service %s does not have", sm.Name, ep.Port, svc.Name))
			continue
		}
		if tp, err := resolvePort(c, svc.Spec.Ports[i].TargetPort); err != nil || tp != metricsPort {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s port %q does not reach AGENT_METRICS_ADDR port %d", sm.Name, ep.Port, metricsPort))
		}
		if ep.Path != "/metrics" {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s path %q, want /metrics", sm.Name, ep.Path))
		}
		if ep.Scheme != nil && !strings.EqualFold(string(*ep.Scheme), "http") {
			errs = append(errs, fmt.Errorf("ServiceMonitor %s scheme %q: the metrics listener is plaintext", sm.Name, *ep.Scheme))
		}
	}
	return errors.Join(errs...)
}

var agentEnvRe = regexp.MustCompile(`"(AGENT_[A-Z0-9_]+)"`)

// knownAgentEnv reads the AGENT_* names agentd's command defines from its
// source, plus the pending ones.
func knownAgentEnv() (map[string]bool, error) {
	// The command and the packages under it (its flag set may live in one).
	var files []string
	err := filepath.WalkDir("../cmd", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "e2e" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("read ../cmd: %v (%d files)", err, len(files))
	}
	known := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range agentEnvRe.FindAllSubmatch(b, -1) {
			known[string(m[1])] = true
		}
	}
	for _, e := range pendingEnv {
		known[e] = true
	}
	return known, nil
}

var envRefRe = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func checkEnv(s *set) error {
	c := agentd(s)
	known, err := knownAgentEnv()
	if err != nil {
		return err
	}
	var errs []error
	defined := map[string]bool{}
	for _, e := range c.Env {
		if defined[e.Name] {
			errs = append(errs, fmt.Errorf("env %s is set twice", e.Name))
		}
		for _, m := range envRefRe.FindAllStringSubmatch(e.Value, -1) {
			if !defined[m[1]] {
				errs = append(errs, fmt.Errorf("env %s refers to $(%s), which is not defined before it (Kubernetes would leave it unexpanded)", e.Name, m[1]))
			}
		}
		defined[e.Name] = true
		switch {
		case slices.Contains(forbiddenEnv, e.Name):
			errs = append(errs, fmt.Errorf("env %s must not be set on the serve container", e.Name))
		case strings.HasPrefix(e.Name, "AGENT_") && !known[e.Name]:
			errs = append(errs, fmt.Errorf("env %s is not an agentd setting (a typo would be silently ignored)", e.Name))
		}
		if path, ok := downwardEnv[e.Name]; ok {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
				errs = append(errs, fmt.Errorf("env %s must come from the downward API field %s", e.Name, path))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(downwardEnv)) {
		if !defined[name] {
			errs = append(errs, fmt.Errorf("env %s (downward API) is missing", name))
		}
	}
	if v, ok := env(c, "AGENT_OPERATOR"); ok {
		if err := checkSPIFFEID(v); err != nil {
			errs = append(errs, fmt.Errorf("AGENT_OPERATOR: %v", err))
		}
	}
	if v, ok := env(c, "AGENT_ALLOW_PEER"); ok {
		for _, id := range strings.Split(v, ",") {
			if err := checkSPIFFEID(strings.TrimSpace(id)); err != nil {
				errs = append(errs, fmt.Errorf("AGENT_ALLOW_PEER: %v", err))
			}
		}
	}
	if !slices.Equal(c.Args, []string{"serve"}) || len(c.Command) > 0 {
		errs = append(errs, fmt.Errorf("container command %q args %q, want the image's entrypoint with args [serve]", c.Command, c.Args))
	}
	return errors.Join(errs...)
}

func checkImage(s *set) error {
	img := agentd(s).Image
	i := strings.LastIndex(img, ":")
	if strings.Contains(img, "@sha256:") {
		return nil
	}
	if i < 0 || strings.Contains(img[i:], "/") || img[i+1:] == "latest" {
		return fmt.Errorf("image %q must name a version tag or digest, not latest", img)
	}
	if p := agentd(s).ImagePullPolicy; p != corev1.PullIfNotPresent {
		return fmt.Errorf("imagePullPolicy %q, want IfNotPresent for a pinned tag", p)
	}
	return nil
}
