package deploy

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// meshPassthrough are the pod annotations that make Istio's and Linkerd's
// sidecars leave a port alone, inbound and outbound.
var meshPassthrough = []string{
	"traffic.sidecar.istio.io/excludeInboundPorts",
	"traffic.sidecar.istio.io/excludeOutboundPorts",
	"config.linkerd.io/skip-inbound-ports",
	"config.linkerd.io/skip-outbound-ports",
}

// TestMeshOverlayExcludesExactlyTheMTLSPort checks the Istio/Linkerd overlay:
// the sidecars pass agentd's mTLS port through (and only that port: health
// and metrics stay with the mesh), and nothing else differs from the base.
func TestMeshOverlayExcludesExactlyTheMTLSPort(t *testing.T) {
	base, mesh := load(t, "k8s/base"), load(t, "k8s/overlays/mesh")
	for _, k := range meshPassthrough {
		if v, ok := base.deployments[0].Spec.Template.Annotations[k]; ok {
			t.Errorf("the base already sets %s=%q", k, v)
		}
	}
	port, err := containerPort(agentd(mesh), a2aPortName)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(int(port))
	ann := mesh.deployments[0].Spec.Template.Annotations
	for _, k := range meshPassthrough {
		if got := ann[k]; got != want {
			t.Errorf("%s=%q, want exactly the mTLS port %q", k, got, want)
		}
	}
	if extra := slices.DeleteFunc(slices.Sorted(maps.Keys(ann)), func(k string) bool { return slices.Contains(meshPassthrough, k) }); len(extra) > 0 {
		t.Errorf("the overlay sets other annotations too: %v", extra)
	}
	// Apart from those annotations, the overlay is the base.
	mesh.deployments[0].Spec.Template.Annotations = base.deployments[0].Spec.Template.Annotations
	mesh.dir = base.dir
	if !reflect.DeepEqual(base, mesh) {
		t.Error("the mesh overlay changes more than the pod annotations")
	}
}

// TestPerReplicaURLOverlay checks that each replica advertises its own pod
// IP in the card, that POD_IP is defined before the URL that uses it, that a
// headless Service lists the replicas, and that nothing else in the
// Deployment changes.
func TestPerReplicaURLOverlay(t *testing.T) {
	base, s := load(t, "k8s/base"), load(t, "k8s/overlays/per-replica-url")
	c := agentd(s)
	if len(c.Env) == 0 || c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Fatalf("env %+v, want POD_IP from status.podIP first", c.Env)
	}
	port, _ := containerPort(c, a2aPortName)
	if got, want := mustEnv(t, c, "AGENT_PUBLIC_URL"), "https://$(POD_IP):"+strconv.Itoa(int(port))+"/"; got != want {
		t.Errorf("AGENT_PUBLIC_URL=%q, want %q", got, want)
	}
	headless := slices.IndexFunc(s.services, func(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone })
	if headless < 0 {
		t.Fatal("no headless Service")
	}
	if ports := s.services[headless].Spec.Ports; len(ports) != 1 || ports[0].Name != a2aPortName {
		t.Errorf("headless Service ports %+v, want only %s", ports, a2aPortName)
	}
	// Without POD_IP and AGENT_PUBLIC_URL, the Deployment is the base's.
	drop := func(e corev1.EnvVar) bool { return e.Name == "POD_IP" || e.Name == "AGENT_PUBLIC_URL" }
	c.Env = slices.DeleteFunc(c.Env, drop)
	bc := agentd(base)
	bc.Env = slices.DeleteFunc(bc.Env, drop)
	if !reflect.DeepEqual(base.deployments[0], s.deployments[0]) {
		t.Error("the per-replica-url overlay changes more of the Deployment than POD_IP and AGENT_PUBLIC_URL")
	}
}

func mustEnv(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	v, ok := env(c, name)
	if !ok {
		t.Fatalf("%s is not set", name)
	}
	return v
}

// The postgres overlay: the store is PostgreSQL with its DSN from a Secret,
// the A2A Service has no affinity, egress reaches 5432, and nothing else of
// the Deployment differs from the base.
func TestPostgresOverlay(t *testing.T) {
	base, s := load(t, "k8s/base"), load(t, "k8s/overlays/postgres")
	c := agentd(s)
	if mustEnv(t, c, "AGENT_STORE") != "postgres" {
		t.Fatal("AGENT_STORE is not postgres")
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "AGENT_STORE_DSN" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil ||
		c.Env[i].ValueFrom.SecretKeyRef.Name != "agentd-store" || c.Env[i].ValueFrom.SecretKeyRef.Key != "dsn" || c.Env[i].Value != "" {
		t.Fatalf("AGENT_STORE_DSN is not from the Secret agentd-store, key dsn: %+v", c.Env)
	}
	svc, err := a2aService(s)
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityNone || svc.Spec.SessionAffinityConfig != nil {
		t.Fatalf("Service affinity %q %+v, want none", svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig)
	}
	pg := false
	for _, r := range s.netpols[0].Spec.Egress {
		for _, p := range r.Ports {
			pg = pg || p.Port != nil && p.Port.IntValue() == 5432
		}
	}
	if !pg {
		t.Fatal("the NetworkPolicy does not let the replicas reach PostgreSQL on 5432")
	}
	drop := func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "AGENT_STORE") }
	c.Env = slices.DeleteFunc(c.Env, drop)
	bc := agentd(base)
	bc.Env = slices.DeleteFunc(bc.Env, drop)
	if !reflect.DeepEqual(base.deployments[0], s.deployments[0]) {
		t.Error("the postgres overlay changes more of the Deployment than the AGENT_STORE settings")
	}
}
