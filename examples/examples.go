// Package examples holds the example scripts of the tributary program and
// the event files they read, embedded so that `tributary demo` runs from
// any directory. Run one from the repository root with
//
//	go run ./cmd/tributary run -echo examples/demo.tri
//
// Event file names in a script are relative to the script's directory.
package examples

import "embed"

// FS holds the scripts (*.tri) and their event files (events/*.json).
//
//go:embed *.tri *.json events/*.json
var FS embed.FS
