package kafka

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestDocsAPITable checks that docs/kafka.md's table of APIs lists
// exactly the APIs the server serves (the apis table ApiVersions
// answers), with the same names and version ranges, in key order. A
// version raised in api.go and not in the docs, an API added or dropped
// on one side only, fails here.
func TestDocsAPITable(t *testing.T) {
	doc, err := os.ReadFile("../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|`)
	var got []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		key, _ := strconv.Atoi(m[1])
		got = append(got, fmt.Sprintf("%d %s %s..%s", key, m[2], m[3], m[4]))
	}
	var want []string
	for _, a := range apis {
		want = append(want, fmt.Sprintf("%d %s %d..%d", a.key, a.name, a.min, a.max))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("docs/kafka.md lists\n%v\nthe server serves\n%v", got, want)
	}
}
