package controllers

import "k8s.io/utils/clock"

// realClock is the clock used unless a test injects its own (k8s.io/utils/clock/testing).
var realClock clock.PassiveClock = clock.RealClock{}
