package a2abind

import (
	"context"

	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/api"
)

// CallerMetadata returns the task metadata naming the caller found in ctx's
// a2asrv call context (set by the HTTP front's authentication). A caller with
// no call context is recorded as anonymous, so a client cannot plant these
// keys through the message's own metadata.
func CallerMetadata(ctx context.Context) map[string]any {
	name, auth := "", "none"
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil {
		name = cc.User.Name()
		if m, ok := cc.User.(interface{ AuthMethod() string }); ok {
			auth = m.AuthMethod()
		} else if cc.User.Authenticated() {
			auth = "unknown"
		}
	}
	return map[string]any{api.MetaCaller: name, api.MetaCallerAuth: auth}
}
