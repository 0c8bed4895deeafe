package a2abind

import (
	"github.com/a2aproject/a2a-go/a2a"
)

// ProtocolVersion is the A2A 0.3 protocol version the card's 0.3 fields
// declare; the 1.0 interface is declared beside it (see server.Handler).
const ProtocolVersion = "0.3.0"

// CardConfig is what the agent card says about this service.
type CardConfig struct {
	Name        string
	Description string
	URL         string // the JSON-RPC endpoint
	Version     string
	// Instance is this agentd's id on delegation hop lists, published in the
	// contract extension so callers can refuse a cycle before sending.
	Instance string
	// MaxDepth is the mesh depth cap this service enforces.
	MaxDepth int
	// Push reports whether push notifications are offered.
	Push bool
	// MutualTLS and Bearer declare the security schemes in force: a SPIFFE
	// X.509 SVID client certificate, and a bearer token (a JWT-SVID or a static
	// token). Either one is enough.
	MutualTLS bool
	Bearer    bool
	// DocumentationURL and Skills, when set, are the deployment's (the
	// agents file); nil Skills is the one skill "delegate".
	DocumentationURL string
	Skills           []a2a.AgentSkill
}

// Card returns the agent card served at /.well-known/agent-card.json. It
// declares the agentd contract extension: this peer honours output schemas,
// depth limits and tool filters, and reads the structured delegation.
func Card(c CardConfig) *a2a.AgentCard {
	params := map[string]any{
		"honours": []any{"output_schema", "depth_limit", "tool_filter"},
	}
	if c.Instance != "" {
		params["instance"] = c.Instance
	}
	if c.MaxDepth > 0 {
		params["max_depth"] = c.MaxDepth
	}
	card := &a2a.AgentCard{
		Name:               c.Name,
		Description:        c.Description,
		URL:                c.URL,
		Version:            c.Version,
		ProtocolVersion:    ProtocolVersion,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities: a2a.AgentCapabilities{
			Streaming:         true,
			PushNotifications: c.Push,
			Extensions: []a2a.AgentExtension{{
				URI:         ContractExtensionURI,
				Description: "agentd delegation contract: this peer honours output schemas, depth limits and tool filters; it reads the structured delegation from the data part agentd/delegation and the mesh metadata agentd/depth, agentd/max_depth, agentd/hops and agentd/budget, and reports the exact terminal status and usage in task metadata (agentd/status, agentd/usage).",
				Params:      params,
			}},
		},
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
	if c.Skills != nil {
		card.Skills = c.Skills
	}
	card.DocumentationURL = c.DocumentationURL
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
