//go:build linux

// Command pause is the sandbox ("pause") container of the real-cluster lane
// (hack/realcluster): the process that holds a pod's namespaces while its containers come and
// go. No registry is reachable on the project's machines, so the lane builds this instead of
// pulling registry.k8s.io/pause, and packages it with hack/imagetar.
//
// It does what upstream's pause.c does: as PID 1 of the pod it reaps every child that is
// re-parented to it (so no zombie outlives its container), and it exits 0 on SIGTERM or SIGINT,
// the way the runtime stops a sandbox. It never reads input and never writes, except one line on
// stderr when it stops.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", sig)
		os.Exit(0)
	}
}

// reapChildren waits for every child that has exited, without blocking: one SIGCHLD may stand
// for several exits.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
