// Package deploy validates agentd's container image recipe (Dockerfile) and
// its Kubernetes manifests (k8s/) offline, with no cluster and no container
// engine. It has no code of its own: its tests render every kustomization
// with kustomize's own library, decode each object strictly into its
// Kubernetes Go type, run the PodSecurity "restricted" evaluator on the pod
// template, check the invariants that tie the manifests to each other and to
// agentd's flags, and parse the Dockerfile with BuildKit's parser.
//
// It is a module of its own so that the Kubernetes libraries stay out of the
// main module: `cd deploy && go test ./...` (or `make deploy-test`).
package deploy
