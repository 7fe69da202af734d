package podsync

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// HashContainer is the kubelet's container hash, as the hex string it writes
// to the io.kubernetes.container.hash annotation: FNV-32a over the go-spew
// "%#v" rendering of the JSON object {"image":…,"name":…}. Only the name and
// the image count; a change of either recreates the container. For
// name "app" and image "nginx:1.25" it is "e324a2d6".
func HashContainer(c *corev1.Container) string {
	return strconv.FormatUint(uint64(hashContainer(c.Name, c.Image)), 16)
}

func hashContainer(name, image string) uint32 {
	// The JSON the kubelet hashes: encoding/json's rendering of the map
	// {"image": image, "name": name} (keys sorted, HTML characters escaped).
	var js []byte
	if jsonSafe(name) && jsonSafe(image) {
		var buf [256]byte
		js = append(buf[:0], `{"image":"`...)
		js = append(js, image...)
		js = append(js, `","name":"`...)
		js = append(js, name...)
		js = append(js, `"}`...)
	} else {
		js, _ = json.Marshal(map[string]string{"name": name, "image": image})
	}
	// FNV-32a over go-spew's %#v of a []byte: the type in parentheses, then
	// the bytes in decimal, space separated, in brackets.
	h := fnvUint8Prefix
	for i, b := range js {
		if i > 0 {
			h = (h ^ ' ') * fnvPrime
		}
		for _, c := range []byte(decimalByte[b]) {
			h = (h ^ uint32(c)) * fnvPrime
		}
	}
	return (h ^ ']') * fnvPrime
}

const fnvPrime = 16777619

var (
	// decimalByte[b] is b in decimal.
	decimalByte [256]string
	// fnvUint8Prefix is FNV-32a's state after "([]uint8)[".
	fnvUint8Prefix uint32
)

func init() {
	for i := range decimalByte {
		decimalByte[i] = strconv.Itoa(i)
	}
	h := uint32(2166136261)
	for _, c := range []byte("([]uint8)[") {
		h = (h ^ uint32(c)) * fnvPrime
	}
	fnvUint8Prefix = h
}

// jsonSafe reports whether encoding/json writes s between quotes unchanged.
func jsonSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
