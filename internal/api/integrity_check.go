package api

// IntegrityCheckReport is msb integrity check's answer: the static
// integrity rules applied to the patches of whole datasets, counted per
// repository.
type IntegrityCheckReport struct {
	// Patches is what was checked: "gold" (the reference fixes) or the
	// predictions file.
	Patches string `json:"patches"`
	Rows    int    `json:"rows"`
	Flagged int    `json:"flagged"`
	// SkippedRows are dataset rows that are not valid instances.
	SkippedRows int                         `json:"skipped_rows"`
	Repos       List[IntegrityRepoCount]    `json:"repos"`
	Flags       List[IntegrityPatchFlagged] `json:"flags"`
}

// IntegrityRepoCount is one repository's rows and flagged patches.
type IntegrityRepoCount struct {
	Repo    string `json:"repo"`
	Rows    int    `json:"rows"`
	Flagged int    `json:"flagged"`
}

// IntegrityPatchFlagged is one flagged patch: its instance, the kinds of
// the rules that flag it and their reasons (integrity_reasons' form).
type IntegrityPatchFlagged struct {
	InstanceID string       `json:"instance_id"`
	Repo       string       `json:"repo"`
	Kinds      List[string] `json:"kinds"`
	Reasons    List[string] `json:"reasons"`
}
