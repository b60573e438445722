// Package repotest holds tests of the repository's own tooling: the hygiene
// check that .ci/run runs before the tests (scripts/hygiene). It has no API.
package repotest
