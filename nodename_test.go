package nodekit

import (
	"os"
	"strings"
	"testing"
)

func TestNodeName(t *testing.T) {
	if got, err := NodeName(" Edge-1 "); err != nil || got != "edge-1" {
		t.Errorf("NodeName(\" Edge-1 \") = %q, %v; want edge-1", got, err)
	}
	host, _ := os.Hostname()
	if got, err := NodeName(""); err != nil || got != strings.ToLower(host) {
		t.Errorf("NodeName(\"\") = %q, %v; want the host name %q lower-cased", got, err, host)
	}
	if _, err := NodeName("Not_Valid"); err == nil || !strings.Contains(err.Error(), `"not_valid"`) {
		t.Errorf("NodeName(\"Not_Valid\") = %v; want an error naming it", err)
	}
}
