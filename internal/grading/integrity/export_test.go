package integrity

// ApplyHunks is applyHunks, for the tests.
var ApplyHunks = applyHunks
