// Package docs holds the project's documents (README.md at the root, and
// the pages beside this file) and the tests that hold them to the code:
// every picture and table is what results.json makes of it, every Go
// block is the source of code that tests compile and run, the layout
// names every package, and the README counts the contract's tests.
package docs
