package v1alpha1

import "fmt"

var binaryUnits = []string{"KiB", "MiB", "GiB", "TiB", "PiB"}

// FormatBytesPerSecond writes a byte rate for people, with one decimal and binary units,
// using integer arithmetic only: 512 -> "512B/s", 47395635 -> "45.2MiB/s".
func FormatBytesPerSecond(v int64) string {
	if v < 0 {
		v = 0
	}
	if v < 1024 {
		return fmt.Sprintf("%dB/s", v)
	}
	unit, i := int64(1024), 0
	for i < len(binaryUnits)-1 && v >= unit*1024 {
		unit *= 1024
		i++
	}
	tenths := v/unit*10 + v%unit*10/unit // rounds down; no overflow
	return fmt.Sprintf("%d.%d%s/s", tenths/10, tenths%10, binaryUnits[i])
}

// FormatPercent writes a progress percentage for printing: 62 -> "62%".
func FormatPercent(p int32) string { return fmt.Sprintf("%d%%", p) }
