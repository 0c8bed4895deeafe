package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// The audit trail. Every a2a.* call is logged (LogOperatorCall, with its
// target); an operator's call (every a2a.* method, reads included, but
// a2a.Audit itself, whose paging would change the trail it pages) is also
// appended to the store's trail (Operator.Audit), which a2a.Audit pages through: the replicas of one
// PostgreSQL share it. Calls refused to non-operators are logged at warn but
// not stored, so no peer can push the operators' records out of the trail's
// bounded retention.

// maxAuditFilter bounds the bytes of a2a.Audit's method and caller filters.
const maxAuditFilter = 1024

// auditStoreTimeout bounds the append of one record: the action is done
// whatever the store says, and the request that made it waits no longer.
const auditStoreTimeout = 5 * time.Second

// auditTarget is what an a2a.* call acts on, from its params: the handle of
// a2a.Cancel (api.CancelAll when it names none), the key of
// a2a.CloseBreaker, the task of a2a.Answer (and of a2a.Questions, when it
// names one); "" for the service-wide methods.
func auditTarget(method string, params json.RawMessage) string {
	var p struct {
		Handle string `json:"handle"`
		Key    string `json:"key"`
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(params, &p) // the method refuses params it cannot decode
	switch method {
	case api.OpCancel:
		if p.Handle == "" {
			return api.CancelAll
		}
		return p.Handle
	case api.OpCloseBreaker:
		return p.Key
	case api.OpQuestions, api.OpAnswer:
		return p.TaskID
	case api.OpSteer, api.OpPause, api.OpResume:
		return p.Handle
	}
	return ""
}

// auditRead reports whether a call reads the trail itself (a2a.Audit): it
// is logged, not stored.
func auditRead(method string, _ json.RawMessage) bool {
	return method == api.OpAudit
}

// auditCaller is an identity as the trail names it: its SPIFFE ID or
// token:NAME, "anonymous" for the unauthenticated caller of the
// development mode.
func auditCaller(id *Identity) string {
	if id == nil || id.ID == "" {
		return "anonymous"
	}
	return id.ID
}

// recorded wraps an operator method so that each call that acts (not
// auditRead) is appended to o.Audit with the caller, the method, its target
// and outcome: Detail is the error's text, or the params of a call that
// succeeded (at most maxAuditParams bytes).
func (o *Operator) recorded(name string, m Method) Method {
	return func(ctx context.Context, params json.RawMessage) (any, error) {
		res, err := m(ctx, params)
		if o.Audit == nil || auditRead(name, params) {
			return res, err
		}
		id, _ := IdentityFrom(ctx)
		r := api.AuditRecord{Time: o.now(), Caller: auditCaller(id), Method: name, Target: auditTarget(name, params), Outcome: "ok", Instance: o.Instance}
		if err != nil {
			r.Outcome, r.Detail = "error", err.Error()
		} else if p := bytes.TrimSpace(params); len(p) > 0 && string(p) != "{}" && string(p) != "null" {
			r.Detail = string(p)
			if len(r.Detail) > maxAuditParams {
				r.Detail = r.Detail[:maxAuditParams] + "..."
			}
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditStoreTimeout)
		defer cancel()
		if aerr := o.Audit.AppendAudit(actx, r); aerr != nil {
			o.log().Warn("operator action not stored in the audit trail", "method", name, "caller", auditCaller(id), "err", aerr)
		}
		return res, err
	}
}

func (o *Operator) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o *Operator) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// audit serves a2a.Audit: a page of the trail, newest first.
func (o *Operator) audit(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.AuditParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	if p.Limit < 0 || p.Limit > api.MaxAuditLimit {
		return nil, invalidParams(fmt.Errorf("limit must be in [1, %d] (0: %d)", api.MaxAuditLimit, api.DefaultAuditLimit))
	}
	if p.Limit == 0 {
		p.Limit = api.DefaultAuditLimit
	}
	for _, f := range []struct{ name, v string }{{"method", p.Method}, {"caller", p.Caller}} {
		if len(f.v) > maxAuditFilter || !utf8.ValidString(f.v) {
			return nil, invalidParams(fmt.Errorf("%s must be valid UTF-8 of at most %d bytes", f.name, maxAuditFilter))
		}
	}
	if o.Audit == nil {
		return nil, &RPCError{Code: CodeUnsupportedOp, Message: "this service keeps no audit trail"}
	}
	res, err := o.Audit.ListAudit(ctx, p)
	if errors.Is(err, a2a.ErrInvalidParams) {
		return nil, invalidParams(errors.New("before is not a cursor this service issued: pass the next of an earlier page"))
	}
	if err != nil {
		return nil, fmt.Errorf("list audit trail: %w", err)
	}
	return res, nil
}
