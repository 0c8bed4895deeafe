package a2acall

// The internal tests' helpers, for the external tests (v1_test.go).
var (
	CtxT         = ctxT
	ArtifactText = artifactText
)
