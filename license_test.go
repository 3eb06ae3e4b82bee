package tributary_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// apache20SHA256 is the SHA-256 of the Apache License 2.0 exactly as
// https://www.apache.org/licenses/LICENSE-2.0.txt serves it (11,358 bytes,
// the copy Debian ships as /usr/share/common-licenses/Apache-2.0).
const apache20SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// Each module carries the licence's canonical text, unedited: the root
// module, the Watermill adapter's and the Prometheus exporter's (a module
// zip holds only its own directory, so each needs a copy of its own).
func TestLicenseIsApache20(t *testing.T) {
	for _, path := range []string{"LICENSE", "watermill/LICENSE", "prometheus/LICENSE"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != apache20SHA256 {
			t.Errorf("%s (%d bytes) is not the canonical Apache License 2.0 text", path, len(b))
		}
	}
}
