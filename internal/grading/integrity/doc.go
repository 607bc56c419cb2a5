// Package integrity checks a model patch, before its verdict counts, for
// changes to the test machinery that the evaluation loads but the task did
// not ask to change: a reward a policy can fake is worse than none.
//
// The nouns:
//
//   - Rule: one kind of test machinery, as data: which files it covers
//     (base names, or a function of the path for the shadowing rules),
//     whether only files the patch creates count, which changed lines count
//     (a setting such as pytest's addopts, not any edit of setup.cfg), and
//     the Reason shown when it fires.
//   - Finding: one file of the patch that a Rule flags, with the rule's
//     Kind and Reason.
//   - Verdict: Ok when the patch has no Finding, Tampered otherwise
//     (api.IntegrityOK, api.IntegrityTampered).
//   - Reason: the text a Finding gives ("<path>: <rule reason>"), the
//     lines of the report's integrity_reasons.
//   - Instance: what the check knows beside the model patch: the test
//     patch, the test command (a script it names is the harness's), and
//     the repository's files at the base commit (Base, the files
//     BasePaths names), which the rules that need more than a diff read
//     whole: the patch's hunks applied to the base file give Full, the
//     file before and after (base.go).
//   - Canary: the dynamic check (canary.go): a test that must fail and
//     one that must pass, under random names, run by the instance's own
//     test command after the harness's run; a Canary's Judge gives
//     reasons of its own ("canary: ..."). Where the runner writes a
//     report of its own (Gradle's JUnit XML, Automake's .trs files), the
//     canary's statuses are that report (Report), and for Automake the
//     log is checked against it (CrossCheck).
//   - Channel: the structured result channel (channel.go): pytest's own
//     report, written by a plugin to a random path the tested code is not
//     told about, against which the statuses the log claims are checked
//     ("channel: ...").
//
// The static check is fast: it reads the model patch and the
// instance's test patch (internal/patch) and runs nothing. What the task
// asked to change is what the test patch touches: the model patch may not
// edit those files at all (the evaluation resets them), and the rules
// look only at what remains. See docs/integrity.md for the threat model.
package integrity
