package skillsscan

import (
	"encoding/json"
	"strings"
)

// SARIF 2.1.0 output (OASIS Static Analysis Results Interchange Format,
// https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html). Only the
// properties Toolplane fills are modelled.

// SARIFSchema is the $schema URI written into every log.
const SARIFSchema = "https://json.schemastore.org/sarif-2.1.0.json"

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri,omitempty"`
	Version        string      `json:"version"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name"`
	ShortDescription     sarifText      `json:"shortDescription"`
	Help                 sarifText      `json:"help"`
	DefaultConfiguration sarifConfig    `json:"defaultConfiguration"`
	Properties           map[string]any `json:"properties"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID     string          `json:"ruleId"`
	RuleIndex  int             `json:"ruleIndex"`
	Level      string          `json:"level"`
	Message    sarifText       `json:"message"`
	Locations  []sarifLocation `json:"locations"`
	Properties map[string]any  `json:"properties"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// SARIFLevel maps a severity to a SARIF level: CRITICAL and HIGH → "error",
// MEDIUM → "warning", LOW → "note".
func SARIFLevel(s Severity) string {
	switch s {
	case Critical, High:
		return "error"
	case Medium:
		return "warning"
	}
	return "note"
}

// securitySeverity is the GitHub code-scanning "security-severity" score.
func securitySeverity(s Severity) string {
	switch s {
	case Critical:
		return "9.5"
	case High:
		return "8.0"
	case Medium:
		return "5.5"
	}
	return "2.0"
}

// SARIF renders a report as a SARIF 2.1.0 log (one run, every rule of the
// set in the driver, one result per finding). root, when non-empty, prefixes
// artifact URIs (e.g. the skill name).
func (rs *Ruleset) SARIF(rep Report, root string) ([]byte, error) {
	drv := sarifDriver{Name: "toolplane-skillscan", Version: "1+" + rs.Digest,
		InformationURI: "https://github.com/toolplane/toolplane"}
	index := map[string]int{}
	for i, r := range rs.Rules {
		index[r.ID] = i
		drv.Rules = append(drv.Rules, sarifRule{
			ID: r.ID, Name: ruleName(r.ID),
			ShortDescription:     sarifText{Text: r.Message},
			Help:                 sarifText{Text: r.Remediation},
			DefaultConfiguration: sarifConfig{Level: SARIFLevel(r.Severity)},
			Properties: map[string]any{
				"tags":              []string{"security", r.Family},
				"severity":          string(r.Severity),
				"security-severity": securitySeverity(r.Severity),
			},
		})
	}
	results := []sarifResult{}
	for _, f := range rep.Findings {
		idx, ok := index[f.RuleID]
		if !ok {
			// Synthetic findings (scan-incomplete) get a rule entry of their own.
			idx = len(drv.Rules)
			index[f.RuleID] = idx
			drv.Rules = append(drv.Rules, sarifRule{ID: f.RuleID, Name: ruleName(f.RuleID),
				ShortDescription: sarifText{Text: f.Message}, Help: sarifText{Text: f.Remediation},
				DefaultConfiguration: sarifConfig{Level: SARIFLevel(f.Severity)},
				Properties: map[string]any{"tags": []string{"security"}, "severity": string(f.Severity),
					"security-severity": securitySeverity(f.Severity)}})
		}
		uri := f.File
		if root != "" {
			uri = strings.TrimSuffix(root, "/") + "/" + f.File
		}
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri}}}
		if f.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: f.Line, StartColumn: f.Column}
		}
		results = append(results, sarifResult{
			RuleID: f.RuleID, RuleIndex: idx, Level: SARIFLevel(f.Severity),
			Message:    sarifText{Text: f.Message + " Evidence: " + f.Evidence},
			Locations:  []sarifLocation{loc},
			Properties: map[string]any{"severity": string(f.Severity), "remediation": f.Remediation},
		})
	}
	return json.MarshalIndent(sarifLog{Schema: SARIFSchema, Version: "2.1.0",
		Runs: []sarifRun{{Tool: sarifTool{Driver: drv}, Results: results}}}, "", "  ")
}

// ruleName turns "shell-curl-pipe-shell" into "ShellCurlPipeShell" (SARIF
// reportingDescriptor.name convention).
func ruleName(id string) string {
	var sb strings.Builder
	for _, p := range strings.Split(id, "-") {
		if p == "" {
			continue
		}
		sb.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return sb.String()
}
