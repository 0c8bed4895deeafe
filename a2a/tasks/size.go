package tasks

import (
	"github.com/a2aproject/a2a-go/a2a"
)

// The byte accounting of the task store.
//
// Size estimates what a snapshot holds in memory: the length of every text,
// file content (base64 as held), URI, name and id, of the strings and keys
// in data parts and metadata, plus a fixed overhead per message (128 bytes),
// part (48), value (16) and map or list (48), which stand for Go's headers
// and map buckets. It is an estimate of the retained heap, not of the JSON:
// close for large content, which is what the budget is for, and cheap (no
// encoding). The same message, shared by successive snapshots, is counted
// once per snapshot, and the store sizes a history's messages once
// (MemoryStore keeps the sum of a history prefix it has seen).

// Overheads of the estimate, in bytes.
const (
	sizeMessage = 128
	sizePart    = 48
	sizeValue   = 16
	sizeMap     = 48
	sizeTask    = 256
)

// Size returns the estimated memory a task snapshot holds.
func Size(t *a2a.Task) int64 {
	n := int64(sizeTask+len(t.ID)+len(t.ContextID)) + valueSize(t.Metadata)
	for _, m := range t.History {
		n += MessageSize(m)
	}
	return n + statusArtifactsSize(t)
}

// statusArtifactsSize is the estimate of a task's status message and
// artifacts: what changes from one snapshot to the next besides the
// history's new messages.
func statusArtifactsSize(t *a2a.Task) int64 {
	n := MessageSize(t.Status.Message)
	for _, a := range t.Artifacts {
		if a == nil {
			continue
		}
		n += int64(sizeMessage+len(a.ID)+len(a.Name)+len(a.Description)) + partsSize(a.Parts) + valueSize(a.Metadata) + stringsSize(a.Extensions)
	}
	return n
}

// MessageSize returns the estimated memory a message holds (0 for nil).
func MessageSize(m *a2a.Message) int64 {
	if m == nil {
		return 0
	}
	n := int64(sizeMessage + len(m.ID) + len(m.ContextID) + len(m.TaskID) + len(m.Role))
	for _, r := range m.ReferenceTasks {
		n += sizeValue + int64(len(r))
	}
	return n + partsSize(m.Parts) + valueSize(m.Metadata) + stringsSize(m.Extensions)
}

// PartSize returns the estimated memory one part holds.
func PartSize(p a2a.Part) int64 {
	n := int64(sizePart)
	switch v := p.(type) {
	case a2a.TextPart:
		n += int64(len(v.Text)) + valueSize(v.Metadata)
	case a2a.DataPart:
		n += valueSize(v.Data) + valueSize(v.Metadata)
	case a2a.FilePart:
		switch f := v.File.(type) {
		case a2a.FileBytes:
			n += int64(len(f.Bytes) + len(f.Name) + len(f.MimeType))
		case a2a.FileURI:
			n += int64(len(f.URI) + len(f.Name) + len(f.MimeType))
		}
		n += valueSize(v.Metadata)
	}
	return n
}

func partsSize(ps a2a.ContentParts) int64 {
	var n int64
	for _, p := range ps {
		n += PartSize(p)
	}
	return n
}

func stringsSize(ss []string) int64 {
	var n int64
	for _, s := range ss {
		n += sizeValue + int64(len(s))
	}
	return n
}

// valueSize estimates a decoded JSON value (metadata, a data part's data).
func valueSize(v any) int64 {
	switch x := v.(type) {
	case nil:
		return 0
	case string:
		return sizeValue + int64(len(x))
	case map[string]any:
		if x == nil {
			return 0
		}
		n := int64(sizeMap)
		for k, e := range x {
			n += sizeValue + int64(len(k)) + valueSize(e)
		}
		return n
	case []any:
		n := int64(sizeMap)
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	case []string:
		return sizeMap + stringsSize(x)
	}
	return sizeValue // numbers, booleans, anything else small
}
