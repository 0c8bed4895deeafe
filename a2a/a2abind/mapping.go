package a2abind

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// StateOf maps a terminal status to its A2A task state: completed to
// completed, refused to rejected, cancelled to canceled, every other status to
// failed (the exact status travels in metadata). ResultFromTask maps back.
func StateOf(s api.TerminalStatus) a2a.TaskState {
	switch s {
	case api.StatusCompleted:
		return a2a.TaskStateCompleted
	case api.StatusRefused:
		return a2a.TaskStateRejected
	case api.StatusCancelled:
		return a2a.TaskStateCanceled
	default:
		return a2a.TaskStateFailed
	}
}

// ArtifactID is the id of a task's one final artifact.
func ArtifactID(taskID a2a.TaskID) a2a.ArtifactID {
	return a2a.ArtifactID(string(taskID) + ".distillate")
}

// DistillateArtifact turns a result's distillate into the task's final
// artifact: a text part for text, a data part for JSON (a non-object value is
// wrapped as {"value": v}, marked with the part metadata api.MetaWrapped), a
// file part with the uri plus the summary text for a stored reference.
func DistillateArtifact(taskID a2a.TaskID, res api.SubagentResult) *a2a.Artifact {
	return DistillateArtifactAt(taskID, res, "")
}

// DistillateArtifactAt is DistillateArtifact for a service reachable at
// publicURL: a reference to a blob the supervisor keeps (agent://blob/ID)
// becomes the URL that serves it over the same server (PublicBlobURL). An
// empty publicURL leaves the uri as it is.
func DistillateArtifactAt(taskID a2a.TaskID, res api.SubagentResult, publicURL string) *a2a.Artifact {
	art := &a2a.Artifact{ID: ArtifactID(taskID), Name: "distillate"}
	d := res.Distillate
	switch {
	case d.Reference != nil:
		art.Parts = a2a.ContentParts{
			a2a.FilePart{File: a2a.FileURI{URI: PublicBlobURL(publicURL, d.Reference.URI), FileMeta: a2a.FileMeta{Name: "distillate"}}},
			a2a.TextPart{Text: d.Reference.Summary},
		}
	case len(d.Inline) > 0 && d.Inline[0] == '"':
		art.Parts = a2a.ContentParts{a2a.TextPart{Text: d.Text()}}
	case len(d.Inline) > 0:
		var v any
		if err := json.Unmarshal(d.Inline, &v); err != nil {
			art.Parts = a2a.ContentParts{a2a.TextPart{Text: string(d.Inline)}}
			break
		}
		obj, ok := v.(map[string]any)
		if !ok {
			art.Parts = a2a.ContentParts{a2a.DataPart{Data: map[string]any{"value": v}, Metadata: map[string]any{api.MetaWrapped: true}}}
			break
		}
		art.Parts = a2a.ContentParts{a2a.DataPart{Data: obj}}
	default:
		art.Parts = a2a.ContentParts{a2a.TextPart{Text: ""}}
	}
	return art
}

// HasArtifact reports whether a result publishes the task's artifact: a
// completed result always does (its answer, even an empty one), any other
// only what the subagent produced, a distillate that is not empty. A task
// cancelled, failed or refused before its subagent wrote anything publishes
// none (artifacts are a task's outputs, a2a.proto's Artifact), and says why
// in its status message.
func HasArtifact(res api.SubagentResult) bool {
	if res.Status == api.StatusCompleted || res.Distillate.Reference != nil {
		return true
	}
	switch strings.TrimSpace(string(res.Distillate.Inline)) {
	case "", `""`, "null":
		return false
	}
	return true
}

// ResultMetadata is the task metadata recording how a subagent ended.
func ResultMetadata(res api.SubagentResult) map[string]any {
	m := map[string]any{
		api.MetaStatus: string(res.Status),
		api.MetaUsage: map[string]any{
			"tokens_in":  res.Usage.TokensIn,
			"tokens_out": res.Usage.TokensOut,
			"steps":      res.Usage.Steps,
		},
	}
	if res.Cause != "" {
		m[api.MetaCause] = res.Cause
	}
	return m
}

// FinalStatus is the terminal status update for a result, with a status
// message explaining any outcome but completed.
func FinalStatus(info a2a.TaskInfoProvider, res api.SubagentResult) *a2a.TaskStatusUpdateEvent {
	var msg *a2a.Message
	if res.Status != api.StatusCompleted {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.TextPart{Text: statusText(res)})
	}
	ev := a2a.NewStatusUpdateEvent(info, StateOf(res.Status), msg)
	ev.Final = true
	ev.Metadata = ResultMetadata(res)
	return ev
}

// PublicBlobURL maps a stored blob's uri (agent://blob/ID) to the URL the
// service serves it at: publicURL's scheme and host, its path joined with
// blobs/ID. Any other uri, or an empty or unparsable publicURL, is returned
// unchanged.
func PublicBlobURL(publicURL, uri string) string {
	id, ok := api.ParseBlobURI(uri)
	if !ok || publicURL == "" {
		return uri
	}
	u, err := url.Parse(publicURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return uri
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/blobs/" + id
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

func now() *time.Time {
	t := time.Now().UTC()
	return &t
}

// statusText is a result's status with its detail, if any: "deadline: ...".
// A detail that starts with the status already ("cancelled: its parent
// ended", as the supervisor words a cancellation, or a peer's status message)
// names it once.
func statusText(res api.SubagentResult) string {
	detail := strings.TrimPrefix(res.Detail, string(res.Status)+": ")
	if detail != "" {
		return fmt.Sprintf("%s: %s", res.Status, detail)
	}
	return string(res.Status)
}

// ResultFromTask maps a task back to a result (a peer's task, as the inverse
// of StateOf, DistillateArtifact and ResultMetadata): the exact status from
// an agentd peer's metadata (agentd set), else by state (completed, rejected to refused,
// canceled to cancelled, failed to crashed; a peer that stopped to ask for
// input or authentication, read so only when nobody here could answer it
// (QuestionFromTask), refused); the distillate from
// its artifact; the usage it reported.
func ResultFromTask(t *a2a.Task, agentd bool) api.SubagentResult {
	res := api.SubagentResult{}
	if s, ok := t.Metadata[api.MetaStatus].(string); agentd && ok && api.TerminalStatus(s).Valid() {
		res.Status = api.TerminalStatus(s)
		res.Cause, _ = t.Metadata[api.MetaCause].(string)
	} else {
		switch t.Status.State {
		case a2a.TaskStateCompleted:
			res.Status = api.StatusCompleted
		case a2a.TaskStateRejected, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
			res.Status = api.StatusRefused
		case a2a.TaskStateCanceled:
			res.Status = api.StatusCancelled
		default:
			res.Status = api.StatusCrashed
		}
	}
	if u, ok := t.Metadata[api.MetaUsage]; ok {
		var usage api.Usage
		if remarshal(u, &usage) == nil && usage.TokensIn >= 0 && usage.TokensOut >= 0 && usage.Steps >= 0 {
			res.Usage = usage
		}
	}
	statusMsg := ""
	if t.Status.Message != nil {
		statusMsg = partsText(t.Status.Message.Parts)
	}
	if res.Status != api.StatusCompleted {
		res.Detail = statusMsg
		if res.Detail == "" {
			res.Detail = "the peer's task ended " + string(t.Status.State)
		}
	}
	arts := t.Artifacts
	if i := slices.IndexFunc(arts, func(a *a2a.Artifact) bool { return a.ID == ArtifactID(t.ID) }); i >= 0 {
		arts = arts[i : i+1]
	}
	res.Distillate = distillateFromParts(arts)
	if len(arts) == 0 && res.Status == api.StatusCompleted && statusMsg != "" {
		res.Distillate = api.InlineText(statusMsg)
	}
	return res
}

// distillateFromParts reads a distillate back from artifacts: a file part with
// text is a stored reference, a single data part is JSON (unwrapping a
// wrapped non-object value), anything else is the text of the text parts.
func distillateFromParts(arts []*a2a.Artifact) api.ResultBody {
	var parts a2a.ContentParts
	for _, a := range arts {
		parts = append(parts, a.Parts...)
	}
	var uri string
	var datas []a2a.DataPart
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.FilePart:
			if f, ok := v.File.(a2a.FileURI); ok && uri == "" {
				uri = f.URI
			}
		case a2a.DataPart:
			datas = append(datas, v)
		}
	}
	text := partsText(parts)
	switch {
	case uri != "":
		return api.ResultBody{Reference: &api.Reference{URI: uri, Summary: text}}
	case len(datas) == 1 && text == "":
		var value any = datas[0].Data
		if w, _ := datas[0].Metadata[api.MetaWrapped].(bool); w {
			value = datas[0].Data["value"]
		}
		if b, err := json.Marshal(value); err == nil {
			return api.ResultBody{Inline: b}
		}
	}
	return api.InlineText(text)
}

func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		if t, ok := p.(a2a.TextPart); ok {
			out = append(out, t.Text)
		}
	}
	return strings.Join(out, "\n")
}
