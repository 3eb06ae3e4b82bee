package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// lineWidth is the most columns a line the program prints to standard
// output takes (help, tables, messages), counted as a terminal shows them
// (text.StringWidthWithoutEscSequences: runewidth, East Asian wide runes
// count two). Tables fit it by cutting long cells with "…" (a show
// command's --wide prints them whole); other lines wrap at spaces.
// TestOutputFitsLineWidth holds help and the golden transcripts to it.
const lineWidth = 100

// width is the number of columns s takes in a terminal.
func width(s string) int { return text.StringWidthWithoutEscSequences(s) }

// wrap breaks s into lines of at most limit columns at spaces; every line
// keeps s's leading spaces, and every line after the first starts with
// indent more. It never breaks inside a
// Go-quoted string, nor inside a pair of the brackets in keep (e.g. "[]<>()"
// keeps a synopsis's "[--dead-letter <topic>]" whole). A piece that cannot
// be broken and is longer than a line gets a line of its own.
func wrap(s string, limit, indent int, keep string) []string {
	body := strings.TrimLeft(s, " ")
	lead := len(s) - len(body)
	indent += lead
	var lines []string
	var cur strings.Builder
	cur.WriteString(s[:lead])
	curWidth := lead
	for i, w := range splitWords(body, keep) {
		ww := width(w)
		switch {
		case i == 0:
		case curWidth+1+ww > limit:
			lines = append(lines, cur.String())
			cur.Reset()
			cur.WriteString(strings.Repeat(" ", indent))
			curWidth = indent
		default:
			cur.WriteByte(' ')
			curWidth++
		}
		cur.WriteString(w)
		curWidth += ww
	}
	return append(lines, cur.String())
}

// splitWords splits s at the spaces outside Go-quoted strings and outside
// the bracket pairs of keep (an opening rune followed by its closing one).
func splitWords(s string, keep string) []string {
	var words []string
	depth, start := 0, 0
	inQuote, escaped := false, false
	for i, r := range s {
		switch {
		case inQuote:
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '"':
				inQuote = false
			}
		case r == '"':
			inQuote = true
		case r == ' ' && depth == 0:
			if i > start {
				words = append(words, s[start:i])
			}
			start = i + 1
		default:
			for k := 0; k+1 < len(keep); k += 2 {
				if r == rune(keep[k]) {
					depth++
				} else if r == rune(keep[k+1]) && depth > 0 {
					depth--
				}
			}
		}
	}
	if start < len(s) {
		words = append(words, s[start:])
	}
	return words
}

// printf prints a message of the program, wrapped to lineWidth at spaces
// with continuation lines indented by two: a list of partitions or an
// assignment of many members stays readable in any terminal.
func (s *session) printf(format string, a ...any) {
	for _, line := range strings.Split(strings.TrimSuffix(fmt.Sprintf(format, a...), "\n"), "\n") {
		for _, l := range wrap(line, lineWidth, 2, "") {
			fmt.Fprintln(s.out, l)
		}
	}
}

// outTable is a table in the program's style: no borders, columns two
// spaces apart, upper-case headers, so that output is aligned for people
// and splits on whitespace for grep and awk. render fits it to lineWidth
// by cutting the cells of its elastic columns (contentColumns first, then
// identifierColumns) with "…", unless wide is set. Other columns (offsets,
// counts, times, flags) are never cut.
type outTable struct {
	header []string
	rows   [][]string
	wide   bool // print every cell whole (a show command's --wide)
}

// contentColumns hold users' data of any length: cut first.
var contentColumns = []string{"VALUE", "HEADERS", "KEY", "EVENT FILE"}

// identifierColumns hold names of up to 64 bytes: cut only when cutting
// the content columns is not enough.
var identifierColumns = []string{"TOPIC", "PARTITION", "CONSUMER", "CONSUMER-ID", "PRODUCER", "GROUPS", "TYPE"}

// minCut is the narrowest a cut column gets (its header permitting):
// enough to recognise what was cut.
const minCut = 10

// newTable is an empty table with these column headers.
func newTable(headers ...any) *outTable {
	t := &outTable{header: make([]string, len(headers))}
	for i, h := range headers {
		t.header[i] = fmt.Sprint(h)
	}
	return t
}

// AppendRow adds a row of cells, one per header.
func (t *outTable) AppendRow(r table.Row) {
	cells := make([]string, len(r))
	for i, c := range r {
		cells[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, cells)
}

// Length is the number of rows.
func (t *outTable) Length() int { return len(t.rows) }

// row is a table row; every cell is printed as text, left-aligned.
func row(cells ...any) table.Row { return table.Row(cells) }

// widths returns the column widths that fit the table into limit columns
// (two columns of space between columns): each column as wide as its
// widest cell or header, then, while the table is too wide, the elastic
// columns of one tier capped at the widest width that makes it fit (never
// below their header or minCut, never above their natural width).
func (t *outTable) widths(limit int) []int {
	natural := make([]int, len(t.header))
	for i, h := range t.header {
		natural[i] = width(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(natural) {
				natural[i] = max(natural[i], width(c))
			}
		}
	}
	w := slices.Clone(natural)
	for _, tier := range [][]string{contentColumns, identifierColumns} {
		if t.wide || total(w) <= limit {
			break
		}
		var cols []int
		hi := 0
		for i, h := range t.header {
			if slices.Contains(tier, h) {
				cols = append(cols, i)
				hi = max(hi, natural[i])
			}
		}
		capped := func(c int) []int {
			v := slices.Clone(w)
			for _, i := range cols {
				v[i] = min(natural[i], max(c, minCut, width(t.header[i])))
			}
			return v
		}
		// The widest cap that fits, by bisection: total(capped(c)) grows
		// with c.
		lo := 0
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if total(capped(mid)) <= limit {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		w = capped(lo)
	}
	return w
}

// total is the width of a table with these column widths.
func total(w []int) int {
	sum := 2 * (len(w) - 1)
	for _, x := range w {
		sum += x
	}
	return sum
}

// quoteCut is strconv.Quote(s) if it takes at most limit columns; else
// the quoted runes of s that fit with "…" before the closing quote, so the
// result is at most limit columns (limit ≥ 3) and never ends inside an
// escape.
func quoteCut(s string, limit int) string {
	if q := strconv.Quote(s); width(q) <= limit {
		return q
	}
	var b strings.Builder
	b.WriteByte('"')
	used := 1
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		e := strconv.Quote(s[i : i+size])
		e = e[1 : len(e)-1]
		if used+width(e)+2 > limit { // 2: "…" and the closing quote
			break
		}
		b.WriteString(e)
		used += width(e)
		i += size
	}
	b.WriteString("…\"")
	return b.String()
}

// snip cuts a cell to maxLen columns, its last one "…".
func snip(cell string, maxLen int) string { return text.Snip(cell, maxLen, "…") }

// render prints t fitted to lineWidth (see outTable), without trailing
// spaces.
func (s *session) render(t *outTable) {
	tw := table.NewWriter()
	st := table.StyleDefault
	st.Options = table.OptionsNoBordersAndSeparators
	st.Box.PaddingLeft, st.Box.PaddingRight = "", "  "
	tw.SetStyle(st)
	header := make(table.Row, len(t.header))
	for i, h := range t.header {
		header[i] = h
	}
	tw.AppendHeader(header)
	for _, r := range t.rows {
		cells := make(table.Row, len(r))
		for i, c := range r {
			cells[i] = c
		}
		tw.AppendRow(cells)
	}
	var cfg []table.ColumnConfig
	for i, w := range t.widths(lineWidth) {
		cfg = append(cfg, table.ColumnConfig{Number: i + 1, WidthMax: w, WidthMaxEnforcer: snip})
	}
	tw.SetColumnConfigs(cfg)
	for _, line := range strings.Split(tw.Render(), "\n") {
		fmt.Fprintln(s.out, strings.TrimRight(line, " "))
	}
}

// printFlags is flag.PrintDefaults fitted to lineWidth: a line per flag
// ("-name value"), then its usage wrapped at spaces and indented by six,
// with its default unless that is the zero value.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		head := "  -" + f.Name
		if name != "" {
			head += " " + name
		}
		fmt.Fprintln(w, head)
		switch def := f.DefValue; {
		case def == "" || def == "false" || def == "0":
		case name == "string":
			usage += fmt.Sprintf(" (default %q)", def)
		default:
			usage += " (default " + def + ")"
		}
		for _, l := range wrap(usage, lineWidth-6, 0, "") {
			fmt.Fprintln(w, "      "+l)
		}
	})
}
