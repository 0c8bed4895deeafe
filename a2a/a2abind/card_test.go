package a2abind

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// TestCardWithoutDeclaredSkillsIsUnchanged: without skills or a
// documentation URL (no --agents file) the card is byte for byte the one
// agentd served before declared agents (testdata/card-default.json, made by
// the card code of commit 6854598); with them, the card lists the
// declared skills in place of "delegate".
func TestCardWithoutDeclaredSkillsIsUnchanged(t *testing.T) {
	cfg := CardConfig{Name: "agentd", Description: "d", URL: "http://127.0.0.1:1/", Version: "0.1.0", Instance: "i", MaxDepth: 4, Push: true, MutualTLS: true, Bearer: true}
	got, err := json.MarshalIndent(Card(cfg), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/card-default.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Fatalf("the default card changed:\n%s", got)
	}
	cfg.Skills = []a2a.AgentSkill{{ID: "research", Name: "Research", Description: "d", Tags: []string{"r"}}}
	cfg.DocumentationURL = "https://docs.example.com/"
	card := Card(cfg)
	if len(card.Skills) != 1 || card.Skills[0].ID != "research" || card.DocumentationURL != cfg.DocumentationURL {
		t.Fatalf("declared skills: %+v", card)
	}
}
