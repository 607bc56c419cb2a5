// Package engine is the one object every front end of msb holds: the CLI
// today, the HTTP server, the Python client's daemon and the Ray workers
// next. It owns the sandbox runtime, the environment cache, the spec
// overrides, the default limits, admission by memory and the registry of
// live sandboxes, and it runs batch evaluations whose results go to a Sink.
//
// The nouns:
//
//   - Config: everything an Engine is opened with, built once at the edge
//     (flags, environment, config file); nothing below reads the
//     environment.
//   - Engine: opened with Open (which first collects what killed msb
//     processes left behind), closed with Close (which closes every live
//     sandbox).
//   - Instances: the tasks the engine knows, by id (LoadDataset, Add).
//   - Sandbox: a live sandbox of the engine, for an instance (the agent's
//     sandbox, at the task's starting state) or from raw cache layers, with
//     labels and limits. Commands, sessions and files go through it; Diff
//     is the agent's patch; Evaluate grades it in a fresh sandbox.
//   - Admission: every sandbox reserves its memory limit against the memory
//     budget (the memory available at Open unless configured), its disk
//     limit against the disk budget, and one of the maximum number of
//     sandboxes; one that does not fit waits, as long as its request
//     allows, then fails with ErrQuota.
//   - Lifetime: every sandbox has a lifetime and an idle timeout; a reaper
//     closes it past either, and the engine remembers what became of it
//     (SandboxInfo's state and reason; ErrGone for other operations).
//   - Stats: what the engine did, for metrics.
//   - Run: a batch evaluation (RunEvaluation) or validation (RunValidation)
//     over many instances with bounded concurrency, resumable: a result the
//     Sink already holds for the same patch and spec is not evaluated again.
//   - Sink: where a run's results go. harness.Dir writes the SWE-bench
//     harness's files; a server streams them; a queue stores them elsewhere.
//   - Cache: the environment cache's inventory and operations (ls, du,
//     verify, gc, export, import, pull, serve), usable without a runtime
//     (OpenCache).
//   - Host: the sandbox runtime alone, without cache or admission
//     (OpenHost), for front ends that start a sandbox of their own or look
//     after the host: Run (one command), Start (a OneShot: one command or
//     an interactive shell on a pty), Doctor, GC.
//     It lives in package engine/host, which a binary can link without the
//     rest of the engine (the lean msb); Host and its types are named here.
//
// Layers below: package task (one instance's sandbox, patch and
// evaluation), sandbox (isolation), envcache and store (layers), grading
// (verdicts), dataset and spec (inputs), api (wire types). See
// docs/engine.md.
package engine
