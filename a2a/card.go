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
}

// Card returns the agent card served at /.well-known/agent-card.json.
func Card(c CardConfig) *a2a.AgentCard {
	return &a2a.AgentCard{
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
}
