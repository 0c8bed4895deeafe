package deploy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// podSecurity resolves the namespace's PodSecurity labels the way the
// admission plugin does and returns the enforced level and version.
func podSecurity(t *testing.T, s *set) psapi.Policy {
	t.Helper()
	ns := s.namespaces[0]
	p, errs := psapi.PolicyToEvaluate(ns.Labels, psapi.Policy{
		Enforce: psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()},
		Audit:   psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()},
		Warn:    psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()},
	})
	if len(errs) > 0 {
		t.Fatalf("namespace %s PodSecurity labels: %v", ns.Name, errs.ToAggregate())
	}
	return p
}

func evaluator(t *testing.T) policy.Evaluator {
	t.Helper()
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPodSecurityRestricted runs the PodSecurity admission checks of the
// latest "restricted" level on the pod template of every kustomization, and
// checks that the namespace enforces, audits and warns at that level.
func TestPodSecurityRestricted(t *testing.T) {
	e := evaluator(t)
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			s := load(t, dir)
			p := podSecurity(t, s)
			for mode, lv := range map[string]psapi.LevelVersion{"enforce": p.Enforce, "audit": p.Audit, "warn": p.Warn} {
				if lv.Level != psapi.LevelRestricted || !lv.Version.Latest() {
					t.Errorf("namespace %s %s is %s, want restricted:latest", s.namespaces[0].Name, mode, lv)
				}
			}
			tmpl := &s.deployments[0].Spec.Template
			res := policy.AggregateCheckResults(e.EvaluatePod(p.Enforce, &tmpl.ObjectMeta, &tmpl.Spec))
			if !res.Allowed {
				t.Fatalf("pod template violates PodSecurity %s: %s", p.Enforce, res.ForbiddenDetail())
			}
		})
	}
}

// TestPodSecurityRefuses proves the evaluator is really applied: each change
// to the pod template that "restricted" forbids is refused.
func TestPodSecurityRefuses(t *testing.T) {
	e := evaluator(t)
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	cases := map[string]func(ps *corev1.PodSpec){
		"runAsNonRoot false": func(ps *corev1.PodSpec) {
			ps.SecurityContext.RunAsNonRoot = ptr(false)
			ps.Containers[0].SecurityContext.RunAsNonRoot = nil
		},
		"run as root":              func(ps *corev1.PodSpec) { ps.Containers[0].SecurityContext.RunAsUser = ptr(int64(0)) },
		"privilege escalation":     func(ps *corev1.PodSpec) { ps.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true) },
		"capabilities not dropped": func(ps *corev1.PodSpec) { ps.Containers[0].SecurityContext.Capabilities.Drop = nil },
		"NET_ADMIN added": func(ps *corev1.PodSpec) {
			ps.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		},
		"seccomp unconfined": func(ps *corev1.PodSpec) {
			ps.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
		},
		"privileged":   func(ps *corev1.PodSpec) { ps.Containers[0].SecurityContext.Privileged = ptr(true) },
		"host network": func(ps *corev1.PodSpec) { ps.HostNetwork = true },
		"hostPath volume": func(ps *corev1.PodSpec) {
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "sock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/spire/sockets"}}})
		},
		"host port": func(ps *corev1.PodSpec) { ps.Containers[0].Ports[0].HostPort = 8443 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			s := load(t, "k8s/base")
			tmpl := &s.deployments[0].Spec.Template
			mutate(&tmpl.Spec)
			res := policy.AggregateCheckResults(e.EvaluatePod(lv, &tmpl.ObjectMeta, &tmpl.Spec))
			if res.Allowed {
				t.Fatal("restricted allowed the changed pod")
			}
			t.Logf("refused: %s", res.ForbiddenDetail())
		})
	}
}
