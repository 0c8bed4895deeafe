package tasks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// Offloading: the large parts of a finished task are kept outside the task
// store.
//
// When a task reaches its terminal state, every part of its history
// messages, its status message and its artifacts whose content is over the
// engine's threshold (WithOffload; DefaultOffloadAbove) is handed to the
// Offloader (agentd's blob store) and replaced, in the stored snapshot, by a
// file part with the URI it is read at: the shape of a distillate stored by
// reference. The replacement part carries api.MetaOffloaded {"kind": "text",
// "data" or "file", "bytes": N} in its metadata, keeps the original part's
// metadata, and, for a file, its name and media type; the task's metadata
// gets api.MetaOffloaded {"parts": N, "bytes": M}. No message is removed, so a
// tasks/get with historyLength returns the same messages as before, some of
// whose parts now reference their content. A part the offloader refuses (its
// store is full) stays in the snapshot.
//
// The live task is not changed: the events subscribers receive, the answer
// of a blocking send and the push notifications carry the content; only the
// stored snapshot, which every later tasks/get and ListTasks reads, is
// compacted. How long the content stays readable is then the blob store's
// business (its budget, quotas and retention).

// DefaultOffloadAbove is the default threshold of WithOffload: parts over 64
// KiB.
const DefaultOffloadAbove = 64 << 10

// Offloader keeps content of a finished task outside the task store.
// Implementations are safe for concurrent use.
type Offloader interface {
	// Offload stores content (of this media type) for the task created by
	// owner and returns the URI it is read at.
	Offload(ctx context.Context, task a2a.TaskID, owner, mediaType string, content []byte) (uri string, err error)
}

// WithOffload moves the parts of a finished task whose content is over above
// bytes (DefaultOffloadAbove when above <= 0) to o before the task's final
// snapshot is stored.
func WithOffload(o Offloader, above int) EngineOption {
	if above <= 0 {
		above = DefaultOffloadAbove
	}
	return func(e *Engine) { e.offload, e.offloadAbove = o, above }
}

// compaction is one snapshot's offloading under way.
type compaction struct {
	e     *Engine
	ctx   context.Context
	task  a2a.TaskID
	owner string
	parts int
	bytes int
}

// compact returns t with its large parts offloaded, or t itself when none
// is; t is not modified.
func (e *Engine) compact(ctx context.Context, t *a2a.Task, owner string) *a2a.Task {
	if e.offload == nil {
		return t
	}
	c := &compaction{e: e, ctx: ctx, task: t.ID, owner: owner}
	out := *t
	changed := false
	for i, m := range t.History {
		if nm := c.message(m); nm != m {
			if !changed {
				out.History = append([]*a2a.Message(nil), t.History...)
				changed = true
			}
			out.History[i] = nm
		}
	}
	if nm := c.message(t.Status.Message); nm != t.Status.Message {
		out.Status.Message = nm
		changed = true
	}
	arts := false
	for i, a := range t.Artifacts {
		if a == nil {
			continue
		}
		if parts, ok := c.partsOf(a.Parts); ok {
			if !arts {
				out.Artifacts = append([]*a2a.Artifact(nil), t.Artifacts...)
				arts = true
			}
			na := *a
			na.Parts = parts
			out.Artifacts[i] = &na
		}
	}
	if !changed && !arts {
		return t
	}
	out.Metadata = maps.Clone(t.Metadata)
	if out.Metadata == nil {
		out.Metadata = map[string]any{}
	}
	out.Metadata[api.MetaOffloaded] = map[string]any{"parts": c.parts, "bytes": c.bytes}
	return &out
}

func (c *compaction) message(m *a2a.Message) *a2a.Message {
	if m == nil {
		return nil
	}
	parts, ok := c.partsOf(m.Parts)
	if !ok {
		return m
	}
	nm := *m
	nm.Parts = parts
	return &nm
}

// partsOf returns parts with the large ones offloaded, and whether any was.
func (c *compaction) partsOf(parts a2a.ContentParts) (a2a.ContentParts, bool) {
	var out a2a.ContentParts
	for i, p := range parts {
		np, ok := c.part(p)
		if !ok {
			continue
		}
		if out == nil {
			out = append(a2a.ContentParts(nil), parts...)
		}
		out[i] = np
	}
	return out, out != nil
}

// part offloads one part if its content is over the threshold.
func (c *compaction) part(p a2a.Part) (a2a.Part, bool) {
	above := c.e.offloadAbove
	var (
		kind, mediaType, name string
		content               []byte
		meta                  map[string]any
	)
	switch v := p.(type) {
	case a2a.TextPart:
		if len(v.Text) <= above {
			return nil, false
		}
		kind, mediaType, content, meta = "text", "text/plain; charset=utf-8", []byte(v.Text), v.Metadata
	case a2a.DataPart:
		if valueSize(v.Data) <= int64(above) { // an estimate first: most data parts are small
			return nil, false
		}
		b, err := json.Marshal(v.Data)
		if err != nil || len(b) <= above {
			return nil, false
		}
		kind, mediaType, content, meta = "data", "application/json", b, v.Metadata
	case a2a.FilePart:
		f, ok := v.File.(a2a.FileBytes)
		if !ok || len(f.Bytes) <= above {
			return nil, false
		}
		b, err := base64.StdEncoding.DecodeString(f.Bytes)
		if err != nil {
			return nil, false // not ours to repair: it stays as it came
		}
		kind, mediaType, name, content, meta = "file", f.MimeType, f.Name, b, v.Metadata
		if mediaType == "" {
			mediaType = "application/octet-stream"
		}
	default:
		return nil, false
	}
	uri, err := c.e.offload.Offload(c.ctx, c.task, c.owner, mediaType, content)
	if err != nil {
		c.e.log.Debug("part kept in the task store", "task_id", c.task, "bytes", len(content), "err", err)
		return nil, false
	}
	c.parts++
	c.bytes += len(content)
	m := maps.Clone(meta)
	if m == nil {
		m = map[string]any{}
	}
	m[api.MetaOffloaded] = map[string]any{"kind": kind, "bytes": len(content)}
	if name == "" {
		name = fmt.Sprintf("%s-part", kind)
	}
	return a2a.FilePart{File: a2a.FileURI{URI: uri, FileMeta: a2a.FileMeta{MimeType: mediaType, Name: name}}, Metadata: m}, true
}
