package v1alpha1

import "testing"

func TestFormatBytesPerSecondUsesOneDecimalAndBinaryUnits(t *testing.T) {
	cases := map[int64]string{
		-5:                  "0B/s",
		0:                   "0B/s",
		512:                 "512B/s",
		1023:                "1023B/s",
		1024:                "1.0KiB/s",
		1536:                "1.5KiB/s",
		47395635:            "45.1MiB/s",
		47400000:            "45.2MiB/s",
		20 << 20:            "20.0MiB/s",
		3 << 30:             "3.0GiB/s",
		5 << 40:             "5.0TiB/s",
		9223372036854775807: "8191.9PiB/s",
	}
	for in, want := range cases {
		if got := FormatBytesPerSecond(in); got != want {
			t.Errorf("FormatBytesPerSecond(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSetPercentClampsAndFormats(t *testing.T) {
	var s VacuumRunStatus
	for in, want := range map[int32]string{-1: "0%", 62: "62%", 250: "100%"} {
		s.SetPercent(in)
		if s.Progress != want {
			t.Errorf("SetPercent(%d) -> %q, want %q", in, s.Progress, want)
		}
	}
}
