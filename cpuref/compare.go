package cpuref

import "math"

// MaxRelErr returns the largest absolute difference between got and want,
// divided by the largest magnitude in want:
//
//	max_i |got_i - want_i| / max_i |want_i|
//
// This is the error relative to the largest magnitude, the measure the
// project's tolerances are stated in: it does not blow up on elements that
// happen to be near zero. When want is all zeros the absolute difference is
// returned. It returns +Inf when the lengths differ or any difference is
// not a number (a NaN in got, such as an unwritten poisoned element, always
// fails a bound).
func MaxRelErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, mag float64
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		diff = math.Max(diff, d)
		mag = math.Max(mag, math.Abs(float64(want[i])))
	}
	if mag == 0 {
		return diff
	}
	return diff / mag
}

// MaxRelErr64 is [MaxRelErr] against a float64 want, such as the output of
// [Oracle64], without rounding want to float32 first.
func MaxRelErr64(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var diff, mag float64
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		diff = math.Max(diff, d)
		mag = math.Max(mag, math.Abs(want[i]))
	}
	if mag == 0 {
		return diff
	}
	return diff / mag
}
