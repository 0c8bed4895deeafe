module github.com/agentd/agentd

go 1.26.8

require (
	github.com/a2aproject/a2a-go v0.3.3 // indirect
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
