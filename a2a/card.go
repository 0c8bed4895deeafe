package a2a

import (
	"github.com/a2aproject/a2a-go/a2a"
)

// ProtocolVersion is the A2A protocol version the card declares.
const ProtocolVersion = "0.3.0"

// CardConfig is what the agent card says about this service.
type CardConfig struct {
	Name        string
	Description string
	URL         string // the JSON-RPC endpoint
	Version     string
	// MutualTLS and Bearer declare the security schemes in force: a SPIFFE
	// X.509 SVID client certificate, and a bearer token (a JWT-SVID or a static
	// token). Either one is enough.
	MutualTLS bool
	Bearer    bool
}

// Card returns the agent card served at /.well-known/agent-card.json.
func Card(c CardConfig) *a2a.AgentCard {
	card := &a2a.AgentCard{
		Name:               c.Name,
		Description:        c.Description,
		URL:                c.URL,
		Version:            c.Version,
		ProtocolVersion:    ProtocolVersion,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID:          "delegate",
			Name:        "Delegate a task",
			Description: "Runs the objective in the message as a tree of supervised subagents and returns their distilled result as the task's artifact.",
			Tags:        []string{"delegation", "subagents", "supervised"},
			Examples:    []string{"summarize the open pull requests and post a digest"},
			InputModes:  []string{"text/plain", "application/json"},
			OutputModes: []string{"text/plain", "application/json"},
		}},
	}
	schemes := a2a.NamedSecuritySchemes{}
	if c.MutualTLS {
		schemes["mtls"] = a2a.MutualTLSSecurityScheme{Description: "a SPIFFE X.509 SVID as the TLS client certificate"}
		card.Security = append(card.Security, a2a.SecurityRequirements{"mtls": {}})
	}
	if c.Bearer {
		schemes["bearer"] = a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT-SVID or static token", Description: "a JWT-SVID whose audience is this service's SPIFFE ID, or a static token"}
		card.Security = append(card.Security, a2a.SecurityRequirements{"bearer": {}})
	}
	if len(schemes) > 0 {
		card.SecuritySchemes = schemes
	}
	return card
}
