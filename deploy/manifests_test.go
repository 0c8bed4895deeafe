package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizations are the directories `kubectl apply -k` is meant for. Every
// test that looks at manifests runs over each of them.
var kustomizations = []string{
	"k8s/base",
	"k8s/overlays/mesh",
	"k8s/overlays/per-replica-url",
	"k8s/overlays/postgres",
}

// kinds maps each kind the manifests may contain to the Go type it is
// strictly decoded into. A kind not listed here fails the test.
var kinds = map[schema.GroupVersionKind]func() any{
	{Version: "v1", Kind: "Namespace"}:                                       func() any { return new(corev1.Namespace) },
	{Version: "v1", Kind: "ServiceAccount"}:                                  func() any { return new(corev1.ServiceAccount) },
	{Version: "v1", Kind: "Service"}:                                         func() any { return new(corev1.Service) },
	{Group: "apps", Version: "v1", Kind: "Deployment"}:                       func() any { return new(appsv1.Deployment) },
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}:       func() any { return new(networkingv1.NetworkPolicy) },
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}:            func() any { return new(policyv1.PodDisruptionBudget) },
	{Group: "spire.spiffe.io", Version: "v1alpha1", Kind: "ClusterSPIFFEID"}: func() any { return new(clusterSPIFFEID) },
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}:  func() any { return new(monv1.ServiceMonitor) },
}

// clusterScoped lists the kinds that must carry no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterSPIFFEID": true}

// decodeStrict decodes one YAML document into the Go type of its kind. Like
// the API server, it is case-sensitive and refuses unknown and duplicate
// fields.
func decodeStrict(doc []byte) (any, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("yaml to json: %w", err)
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		return nil, fmt.Errorf("read apiVersion and kind: %w", err)
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	newObj, ok := kinds[gvk]
	if !ok {
		return nil, fmt.Errorf("unexpected kind %q (apiVersion %q)", tm.Kind, tm.APIVersion)
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", tm.Kind, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("decode %s strictly: %w", tm.Kind, errors.Join(strict...))
	}
	return obj, nil
}

// set is one rendered kustomization, each object decoded into its type.
type set struct {
	dir             string
	namespaces      []*corev1.Namespace
	serviceAccounts []*corev1.ServiceAccount
	services        []*corev1.Service
	deployments     []*appsv1.Deployment
	netpols         []*networkingv1.NetworkPolicy
	pdbs            []*policyv1.PodDisruptionBudget
	spiffeIDs       []*clusterSPIFFEID
	monitors        []*monv1.ServiceMonitor
}

// add files a decoded object under its kind.
func (s *set) add(obj any) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		s.namespaces = append(s.namespaces, o)
	case *corev1.ServiceAccount:
		s.serviceAccounts = append(s.serviceAccounts, o)
	case *corev1.Service:
		s.services = append(s.services, o)
	case *appsv1.Deployment:
		s.deployments = append(s.deployments, o)
	case *networkingv1.NetworkPolicy:
		s.netpols = append(s.netpols, o)
	case *policyv1.PodDisruptionBudget:
		s.pdbs = append(s.pdbs, o)
	case *clusterSPIFFEID:
		s.spiffeIDs = append(s.spiffeIDs, o)
	case *monv1.ServiceMonitor:
		s.monitors = append(s.monitors, o)
	default:
		panic(fmt.Sprintf("set.add: no slot for %T", obj))
	}
}

// renderKustomization builds dir with kustomize's own library (what
// `kubectl apply -k` runs) and returns each resulting object as YAML.
func renderKustomization(dir string) ([][]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		docs = append(docs, y)
	}
	return docs, nil
}

var (
	renderMu    sync.Mutex
	renderCache = map[string][][]byte{}
)

// rendered returns the YAML documents of dir, rendering it once per test
// binary.
func rendered(t *testing.T, dir string) [][]byte {
	t.Helper()
	renderMu.Lock()
	defer renderMu.Unlock()
	if docs, ok := renderCache[dir]; ok {
		return docs
	}
	docs, err := renderKustomization(dir)
	if err != nil {
		t.Fatal(err)
	}
	renderCache[dir] = docs
	return docs
}

// load renders dir and decodes every object strictly into a fresh set, so a
// test may change the set without affecting others.
func load(t *testing.T, dir string) *set {
	t.Helper()
	s := &set{dir: dir}
	for _, doc := range rendered(t, dir) {
		obj, err := decodeStrict(doc)
		if err != nil {
			t.Fatalf("%s: %v\n%s", dir, err, doc)
		}
		s.add(obj)
	}
	return s
}

// TestManifestsDecodeStrictly renders every kustomization and decodes each
// object into its Kubernetes type (unknown fields fail), and checks that each
// base kind is there exactly once.
func TestManifestsDecodeStrictly(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			s := load(t, dir)
			counts := map[string]int{
				"Namespace":           len(s.namespaces),
				"ServiceAccount":      len(s.serviceAccounts),
				"Deployment":          len(s.deployments),
				"NetworkPolicy":       len(s.netpols),
				"PodDisruptionBudget": len(s.pdbs),
				"ClusterSPIFFEID":     len(s.spiffeIDs),
				"ServiceMonitor":      len(s.monitors),
			}
			for kind, n := range counts {
				if n != 1 {
					t.Errorf("%d %s objects, want exactly 1", n, kind)
				}
			}
			if len(s.services) < 2 {
				t.Errorf("%d Services, want at least 2 (A2A and metrics)", len(s.services))
			}
		})
	}
}

// TestDecodeStrictRefuses proves the strict decoder can fail: a misspelt
// field, a field in the wrong case, a duplicate key, an unknown kind and an
// unknown field of each CRD mirror are each refused.
func TestDecodeStrictRefuses(t *testing.T) {
	cases := map[string]string{
		"unknown field": `apiVersion: v1
kind: ServiceAccount
metadata: {name: a}
automountServiceAccountTokn: false
`,
		"wrong case": `apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
spec:
  template:
    spec:
      containers:
        - name: a
          ports: [{containerport: 8443}]
`,
		"duplicate key": `apiVersion: v1
kind: Service
metadata: {name: a}
spec:
  type: ClusterIP
  type: NodePort
`,
		"unknown kind": `apiVersion: v1
kind: Pod
metadata: {name: a}
`,
		"ClusterSPIFFEID unknown field": `apiVersion: spire.spiffe.io/v1alpha1
kind: ClusterSPIFFEID
metadata: {name: a}
spec:
  spiffeIdTemplate: "spiffe://x/y"
`,
		"ServiceMonitor unknown field": `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: a}
spec:
  selector: {}
  endpoints: [{port: metrics, interva: 30s}]
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeStrict([]byte(doc)); err == nil {
				t.Fatalf("decoded without error:\n%s", doc)
			} else {
				t.Logf("refused: %v", err)
			}
		})
	}
}

// TestKustomizationsReferenceEveryFile checks that each kustomization is
// well-formed (strictly decoded into kustomize's own type) and that every
// YAML file beside it is used: a manifest that no kustomization lists would
// silently never be applied.
func TestKustomizationsReferenceEveryFile(t *testing.T) {
	var dirs []string
	err := filepath.WalkDir("k8s", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	if !slices.Equal(dirs, sorted(kustomizations)) {
		t.Fatalf("kustomization directories %v, the tests cover %v", dirs, kustomizations)
	}
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var k types.Kustomization
		if strict, err := kjson.UnmarshalStrict(j, &k); err != nil || len(strict) > 0 {
			t.Fatalf("%s/kustomization.yaml: %v %v", dir, err, strict)
		}
		used := map[string]bool{}
		for _, r := range k.Resources {
			used[filepath.Clean(filepath.Join(dir, r))] = true
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				used[filepath.Clean(filepath.Join(dir, p.Path))] = true
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := filepath.Join(dir, e.Name())
			if e.IsDir() || e.Name() == "kustomization.yaml" || !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			if !used[name] {
				t.Errorf("%s is not referenced by %s/kustomization.yaml", name, dir)
			}
		}
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}
