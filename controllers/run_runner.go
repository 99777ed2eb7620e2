package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Runner calls. No reconcile waits on a runner pod's HTTP endpoint: a pod that accepts and
// never answers, a default-deny NetworkPolicy that drops the SYN, or a partitioned node
// would otherwise hold a worker for the whole timeout on every poll, and with a few such
// runs every other run of the cluster (those that must restore an app among them) would
// wait behind them. A reconcile reads the last answer a run's pod gave and, when none is
// on the way, starts the next call in a goroutine of its own, bounded by a short timeout;
// the answer is kept here and a reconcile of the run is queued through events (a channel
// source of the controller), so the run's status moves as soon as the pod answers.
const (
	// runnerCallTimeout bounds one call to a runner pod.
	runnerCallTimeout = 2 * time.Second
	// throttleRetry is how soon a failed throttle push is tried again.
	throttleRetry = 2 * time.Second
)

// runnerCalls holds, per run, the calls in flight to its pod and their last answers.
type runnerCalls struct {
	mu     sync.Mutex
	byRun  map[types.UID]*runnerState
	events chan event.GenericEvent // nil when no controller listens (tests calling Reconcile)
	wg     sync.WaitGroup
}

// runnerState is what is known of one run's pod.
type runnerState struct {
	pod string // the pod the state is about; another pod of the run starts afresh

	polling  bool
	polled   time.Time // when the last poll ended
	progress *runnerwire.Progress
	pollErr  error

	pushing  bool
	pushed   time.Time                // when the last push ended
	sent     *vacuumv1alpha1.Throttle // the throttle of the last push that ended
	pushErr  error                    // its outcome
	reported bool                     // whether a reconcile has reported that failure

	pause pauseState // PUT /pause (run_pause.go)
}

func newRunnerCalls(events chan event.GenericEvent) *runnerCalls {
	return &runnerCalls{byRun: map[types.UID]*runnerState{}, events: events}
}

// state returns the run's state for its current pod, under c.mu.
func (c *runnerCalls) state(run *vacuumv1alpha1.VacuumRun, pod string) *runnerState {
	s := c.byRun[run.UID]
	if s == nil || s.pod != pod {
		s = &runnerState{pod: pod}
		c.byRun[run.UID] = s
	}
	return s
}

// progress returns the last /progress the run's pod answered (nil when none yet) and starts
// the next poll when none is in flight and the last one ended interval ago or more.
func (c *runnerCalls) progress(run *vacuumv1alpha1.VacuumRun, pod, ip string, interval time.Duration,
	fetch func(ctx context.Context, ip string) (*runnerwire.Progress, error)) (*runnerwire.Progress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state(run, pod)
	if !s.polling && (s.polled.IsZero() || time.Since(s.polled) >= interval) {
		s.polling = true
		c.start(run, func(ctx context.Context) {
			p, err := fetch(ctx, ip)
			c.mu.Lock()
			s.polling, s.polled = false, time.Now()
			if err == nil {
				s.progress = p
			}
			s.pollErr = err
			c.mu.Unlock()
		})
	}
	return s.progress, s.pollErr
}

// pushOutcome is what a reconcile learns of the push of the run's spec.throttle.
type pushOutcome int

const (
	pushPending pushOutcome = iota // in flight, or just started
	pushApplied                    // the pod took this throttle
	pushFailed                     // the last push of it failed; another starts after throttleRetry
)

// push makes the run's pod take throttle (PUT /throttle). It says applied once a push of
// that same throttle succeeded, failed once (for one event) when it failed, and starts a push
// when none is in flight and the last one was of another throttle, or failed throttleRetry
// ago.
func (c *runnerCalls) push(run *vacuumv1alpha1.VacuumRun, pod, ip string, throttle *vacuumv1alpha1.Throttle,
	send func(ctx context.Context, ip string, t *vacuumv1alpha1.Throttle) error) (pushOutcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state(run, pod)
	if s.pushing {
		return pushPending, nil
	}
	if s.sent != nil && equality.Semantic.DeepEqual(s.sent, throttle) {
		switch {
		case s.pushErr == nil:
			return pushApplied, nil
		case !s.reported:
			s.reported = true
			return pushFailed, s.pushErr
		case time.Since(s.pushed) < throttleRetry:
			return pushPending, nil
		}
	}
	s.pushing = true
	t := throttle.DeepCopy()
	c.start(run, func(ctx context.Context) {
		err := send(ctx, ip, t)
		c.mu.Lock()
		s.pushing, s.pushed, s.sent, s.pushErr, s.reported = false, time.Now(), t, err, false
		c.mu.Unlock()
	})
	return pushPending, nil
}

// forget drops what is known of a run whose pod no longer runs.
func (c *runnerCalls) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.byRun, uid)
	c.mu.Unlock()
}

// start runs call in a goroutine of its own with runnerCallTimeout, then queues a reconcile of
// the run. The caller holds c.mu.
func (c *runnerCalls) start(run *vacuumv1alpha1.VacuumRun, call func(ctx context.Context)) {
	obj := &vacuumv1alpha1.VacuumRun{}
	obj.Namespace, obj.Name, obj.UID = run.Namespace, run.Name, run.UID
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), runnerCallTimeout)
		defer cancel()
		call(ctx)
		if c.events != nil {
			select {
			case c.events <- event.GenericEvent{Object: obj}:
			default: // the queue is full of wake-ups already; the periodic requeue still comes
			}
		}
	}()
}

// wait blocks until every call started so far has ended (for tests that play the work queue).
func (c *runnerCalls) wait() { c.wg.Wait() }
