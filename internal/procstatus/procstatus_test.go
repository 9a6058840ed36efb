package procstatus

import "testing"

func TestPeakIsAtLeastRSS(t *testing.T) {
	if err := ResetPeak(); err != nil {
		t.Fatal(err)
	}
	peak, err := Bytes("VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	rss, err := Bytes("VmRSS:")
	if err != nil {
		t.Fatal(err)
	}
	if peak <= 0 || rss <= 0 || peak < rss/2 {
		t.Errorf("VmHWM %d, VmRSS %d", peak, rss)
	}
	if _, err := Bytes("NoSuchField:"); err == nil {
		t.Error("a missing field gave no error")
	}
}
