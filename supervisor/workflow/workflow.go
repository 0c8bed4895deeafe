// Package workflow reads the file of --mode workflow: named steps, each one
// spawn (objective, format, scope, limits, provider), with needs on other
// steps whose distillates become its seed slices. The supervisor runs the
// steps as one tree through its spawn chokepoint (supervisor.WorkflowStep);
// this package only decodes and checks the file, with no I/O of its own
// beyond what Parse is handed.
//
// The file is JSON, decoded strictly: an unknown field, a second value after
// the object, a duplicate step name, a need on an unknown step and a cycle of
// needs are each an error naming the step. Example:
//
//	{"steps": [
//	  {"name": "fetch", "objective": "List the open issues of the project", "scope": ["github/list_issues"]},
//	  {"name": "triage", "objective": "Group the issues by area", "format": "markdown", "needs": ["fetch"],
//	   "limits": {"max_steps": 10, "deadline": "2m"}}
//	]}
package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// MaxSize bounds a workflow file.
const MaxSize = 1 << 20

// MaxSteps bounds the steps of one workflow (the chokepoint's breadth cap
// bounds them further: every step is a child of the workflow's root).
const MaxSteps = 64

// File is a workflow file as decoded.
type File struct {
	Steps []Step `json:"steps"`
}

// Step is one step as the file states it. Limits left zero take what the
// workflow's root grant can still afford; Scope lists SERVER/TOOL names, each
// of which the root grant must hold.
type Step struct {
	Name         string          `json:"name"`
	Objective    string          `json:"objective"`
	Format       string          `json:"format,omitempty"` // text (default), markdown or json
	Schema       json.RawMessage `json:"schema,omitempty"` // the JSON schema of a json format
	ToolGuidance string          `json:"tool_guidance,omitempty"`
	Boundaries   string          `json:"boundaries,omitempty"`
	Scope        []string        `json:"scope,omitempty"`
	Limits       api.Limits      `json:"limits,omitzero"`
	Provider     string          `json:"provider,omitempty"`
	Needs        []string        `json:"needs,omitempty"`
	Seed         []api.SeedSlice `json:"seed,omitempty"` // extra slices, before those of its needs
}

// Parse decodes and checks a workflow file and returns its steps, in file
// order, for supervisor.StartRequest.Workflow.
func Parse(src []byte) ([]supervisor.WorkflowStep, error) {
	if len(src) > MaxSize {
		return nil, fmt.Errorf("workflow: larger than %d bytes", MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("workflow: %w", err)
	}
	if dec.More() {
		return nil, errors.New("workflow: trailing data after the object")
	}
	return f.Check()
}

// Check validates the file and converts its steps.
func (f File) Check() ([]supervisor.WorkflowStep, error) {
	if len(f.Steps) == 0 {
		return nil, errors.New("workflow: no steps")
	}
	if len(f.Steps) > MaxSteps {
		return nil, fmt.Errorf("workflow: %d steps, more than %d", len(f.Steps), MaxSteps)
	}
	index := make(map[string]int, len(f.Steps))
	for i, s := range f.Steps {
		if err := checkName(s.Name); err != nil {
			return nil, fmt.Errorf("workflow: steps[%d]: %w", i, err)
		}
		if _, dup := index[s.Name]; dup {
			return nil, fmt.Errorf("workflow: step %q is named twice", s.Name)
		}
		index[s.Name] = i
	}
	out := make([]supervisor.WorkflowStep, len(f.Steps))
	for i, s := range f.Steps {
		ws, err := s.convert(index)
		if err != nil {
			return nil, fmt.Errorf("workflow: step %q: %w", s.Name, err)
		}
		out[i] = ws
	}
	if cycle := findCycle(f.Steps, index); cycle != nil {
		return nil, fmt.Errorf("workflow: a cycle of needs: %s", strings.Join(cycle, " -> "))
	}
	return out, nil
}

// checkName: 1 to 64 of [A-Za-z0-9_-].
func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("name %q: want 1 to 64 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name %q: want letters, digits, '_' and '-'", name)
		}
	}
	return nil
}

func (s Step) convert(index map[string]int) (supervisor.WorkflowStep, error) {
	format := s.Format
	if format == "" {
		format = api.FormatText
	}
	contract := api.OutputContract{
		Objective:    s.Objective,
		OutputFormat: api.OutputFormat{Kind: format, Schema: s.Schema},
		ToolGuidance: s.ToolGuidance,
		Boundaries:   s.Boundaries,
	}
	if err := contract.Validate(); err != nil {
		return supervisor.WorkflowStep{}, err
	}
	var scope api.ToolScope
	for _, name := range s.Scope {
		ref, ok := api.ParseToolRef(name)
		if !ok {
			return supervisor.WorkflowStep{}, fmt.Errorf("scope %q: want SERVER/TOOL", name)
		}
		scope.Allow = append(scope.Allow, ref)
	}
	l := s.Limits
	if l.MaxSteps < 0 || l.MaxTokens < 0 || l.Deadline < 0 || l.MaxChildren < 0 {
		return supervisor.WorkflowStep{}, errors.New("limits: a limit must not be negative (leave it out for the most the root can afford)")
	}
	if l.Deadline.D() > api.MaxDeadline {
		return supervisor.WorkflowStep{}, fmt.Errorf("limits.deadline %s exceeds the maximum of %s", l.Deadline, api.MaxDeadline)
	}
	seed := api.ContextSeed{Slices: s.Seed}
	if err := seed.Validate(); err != nil {
		return supervisor.WorkflowStep{}, err
	}
	seen := map[string]bool{}
	for _, n := range s.Needs {
		if _, ok := index[n]; !ok {
			return supervisor.WorkflowStep{}, fmt.Errorf("needs %q: no step has that name", n)
		}
		if n == s.Name {
			return supervisor.WorkflowStep{}, fmt.Errorf("needs itself")
		}
		if seen[n] {
			return supervisor.WorkflowStep{}, fmt.Errorf("needs %q twice", n)
		}
		seen[n] = true
	}
	return supervisor.WorkflowStep{
		Name:  s.Name,
		Spawn: api.SpawnArgs{Contract: contract, Seed: seed, Scope: scope, Limits: l, Provider: s.Provider},
		Needs: append([]string(nil), s.Needs...),
	}, nil
}

// findCycle returns the steps of a cycle of needs, the first repeated at the
// end, or nil.
func findCycle(steps []Step, index map[string]int) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(steps))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, steps[i].Name)
		for _, n := range steps[i].Needs {
			j := index[n]
			switch state[j] {
			case onPath:
				for k, p := range path {
					if p == n {
						return append(append([]string(nil), path[k:]...), n)
					}
				}
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range steps {
		if state[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}
