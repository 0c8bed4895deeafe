package deploy

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The spire-controller-manager module is not served by the module proxy, so
// its ClusterSPIFFEID (spire.spiffe.io/v1alpha1) is mirrored here: the spec
// fields of the published CRD, with their JSON names, so that strict decoding
// refuses a misspelt or invented field exactly as the API server's structural
// schema would. Status is left out: a manifest never sets it.

// clusterSPIFFEID mirrors spire.spiffe.io/v1alpha1 ClusterSPIFFEID.
type clusterSPIFFEID struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              clusterSPIFFEIDSpec `json:"spec"`
}

// clusterSPIFFEIDSpec mirrors ClusterSPIFFEIDSpec.
type clusterSPIFFEIDSpec struct {
	SPIFFEIDTemplate          string                `json:"spiffeIDTemplate"`
	TTL                       metav1.Duration       `json:"ttl"`
	JWTTTL                    metav1.Duration       `json:"jwtTtl"`
	DNSNameTemplates          []string              `json:"dnsNameTemplates,omitempty"`
	WorkloadSelectorTemplates []string              `json:"workloadSelectorTemplates,omitempty"`
	FederatesWith             []string              `json:"federatesWith,omitempty"`
	NamespaceSelector         *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	PodSelector               *metav1.LabelSelector `json:"podSelector,omitempty"`
	Admin                     bool                  `json:"admin,omitempty"`
	Downstream                bool                  `json:"downstream,omitempty"`
	AutoPopulateDNSNames      bool                  `json:"autoPopulateDNSNames,omitempty"`
	ClassName                 string                `json:"className,omitempty"`
	Fallback                  bool                  `json:"fallback,omitempty"`
	Hint                      string                `json:"hint,omitempty"`
}

// spiffeIDTemplateData is the data spire-controller-manager executes a
// spiffeIDTemplate with (the names a template may use).
type spiffeIDTemplateData struct {
	TrustDomain   string
	ClusterName   string
	ClusterDomain string
	PodMeta       *metav1.ObjectMeta
	PodSpec       *corev1.PodSpec
	NodeMeta      *metav1.ObjectMeta
	NodeSpec      *corev1.NodeSpec
}
