package a2av1

// ErrorDomain is the domain of every A2A error's google.rpc.ErrorInfo.
const ErrorDomain = "a2a-protocol.org"

// errorInfoType is the @type of google.rpc.ErrorInfo in ProtoJSON.
const errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// ErrorInfo is google.rpc.ErrorInfo as ProtoJSON: the structured detail an A2A
// 1.0 JSON-RPC error carries in its data array.
type ErrorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Reasons of the A2A-specific errors, by JSON-RPC code.
var reasons = map[int]string{
	-32001: "TASK_NOT_FOUND",
	-32002: "TASK_NOT_CANCELABLE",
	-32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
	-32004: "UNSUPPORTED_OPERATION",
	-32005: "CONTENT_TYPE_NOT_SUPPORTED",
	-32006: "INVALID_AGENT_RESPONSE",
	-32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
	-32008: "EXTENSION_SUPPORT_REQUIRED",
	-32009: "VERSION_NOT_SUPPORTED",
}

// CodeVersionNotSupported is the JSON-RPC code of VersionNotSupportedError.
const CodeVersionNotSupported = -32009

// ErrorData returns the data array for a JSON-RPC error with this code: an
// ErrorInfo for A2A-specific codes (with detail, when given, in its metadata),
// nil for the standard JSON-RPC codes without detail.
func ErrorData(code int, detail string) []any {
	var meta map[string]string
	if detail != "" {
		meta = map[string]string{"detail": detail}
	}
	reason, ok := reasons[code]
	if !ok {
		if meta == nil {
			return nil
		}
		// Standard codes carry the detail in an ErrorInfo too, so a 1.0
		// client always finds the same shape.
		reason = "INVALID_REQUEST"
		switch code {
		case -32700:
			reason = "PARSE_ERROR"
		case -32601:
			reason = "METHOD_NOT_FOUND"
		case -32602:
			reason = "INVALID_PARAMS"
		case -32603:
			reason = "INTERNAL"
		}
	}
	return []any{ErrorInfo{Type: errorInfoType, Reason: reason, Domain: ErrorDomain, Metadata: meta}}
}
