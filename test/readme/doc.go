// Package readme runs the command blocks of README.md, so that what the README tells a user to
// type works as written: the laptop commands on a temporary directory, the kind quickstart on
// the real-cluster lane (root; the lane stands in for kind, see the test). A test that always
// runs fails when the README gains a command block no test covers.
package readme
