package a2av1

import "strconv"

// retryInfoType is the @type of google.rpc.RetryInfo in ProtoJSON.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// RetryInfo is google.rpc.RetryInfo as ProtoJSON: how long a client should
// wait before it retries. RetryDelay is a google.protobuf.Duration ("8s").
type RetryInfo struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
}

// ShedDomain is the ErrorInfo domain of agentd's own errors (A2A's are
// ErrorDomain).
const ShedDomain = "agentd"

// ResourceExhausted returns the data array of an error that sheds a request
// for load: an ErrorInfo with reason RESOURCE_EXHAUSTED in ShedDomain (the
// detail, the shedding reason and retryAfterSeconds in its metadata) and a
// RetryInfo with the delay.
func ResourceExhausted(detail, reason string, retryAfterSeconds int) []any {
	meta := map[string]string{"retryAfterSeconds": strconv.Itoa(retryAfterSeconds)}
	if detail != "" {
		meta["detail"] = detail
	}
	if reason != "" {
		meta["reason"] = reason
	}
	return []any{
		ErrorInfo{Type: errorInfoType, Reason: "RESOURCE_EXHAUSTED", Domain: ShedDomain, Metadata: meta},
		RetryInfo{Type: retryInfoType, RetryDelay: strconv.Itoa(retryAfterSeconds) + "s"},
	}
}
