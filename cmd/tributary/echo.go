package main

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxEcho is the most bytes of one piece of user input (a name, an
// argument, a file name, a JSON value, a flag's value) that an error
// message repeats. Input may be as long as a script line (1 MiB) or a
// command-line argument; an error names it by its start, then "…".
const maxEcho = 64

// cut returns the first maxEcho bytes of s, never splitting a UTF-8
// sequence, and whether anything was left out.
func cut(s string) (string, bool) {
	if len(s) <= maxEcho {
		return s, false
	}
	n := maxEcho
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// quote is s Go-quoted for an error message, as %q writes it, but of its
// first maxEcho bytes only, followed by "…" (outside the quotes) when s is
// longer. Every error that repeats user input quoted goes through it.
func quote(s string) string {
	head, more := cut(s)
	if more {
		return strconv.Quote(head) + "…"
	}
	return strconv.Quote(head)
}

// clipped is s as it is, cut like quote: for input an error shows bare (a
// file name, a raw JSON value, a tuple as typed).
func clipped(s string) string {
	head, more := cut(s)
	if more {
		return head + "…"
	}
	return head
}

// cutEchoes shortens, in msg, every whole repetition of one of inputs that
// is longer than maxEcho bytes, quoted (as %q writes it) or bare, to what
// quote or clipped makes of it; an input "-name=value" counts as its two
// sides too. It is for the errors of other packages (flag, os) that repeat
// an argument, or a flag's name or value, whole.
func cutEchoes(msg string, inputs []string) string {
	var long []string
	for _, in := range inputs {
		long = append(long, in)
		if name, value, ok := strings.Cut(in, "="); ok {
			long = append(long, name, strings.TrimLeft(name, "-"), value)
		}
	}
	// Longest first, so that a part does not cut a whole it is inside of.
	slices.SortFunc(long, func(a, b string) int { return len(b) - len(a) })
	for _, in := range long {
		if len(in) <= maxEcho {
			continue
		}
		msg = strings.ReplaceAll(msg, strconv.Quote(in), quote(in))
		msg = strings.ReplaceAll(msg, in, clipped(in))
	}
	return msg
}
