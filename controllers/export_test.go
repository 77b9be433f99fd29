package controllers

// Exported for the envtest suite (package controllers_test), which checks the ungate patch
// against the real API server.
var (
	UngatePatch = ungatePatch
	PodReplaced = podReplaced
)
