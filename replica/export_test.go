package replica

// WritesForTest is writes, for the external tests.
var WritesForTest = writes
