package procstatus

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Bytes reads a "kB" field of /proc/self/status ("VmHWM:"), in bytes.
func Bytes(field string) (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// ResetPeak sets VmHWM back to the current RSS (proc(5): clear_refs 5).
func ResetPeak() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
