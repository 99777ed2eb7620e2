package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// posted is one event the fake API server received: its content type and the event decoded.
type posted struct {
	contentType string
	event       eventsv1.Event
	err         error
}

func TestTheManagersEventsReachTheAPIServerAsProtobuf(t *testing.T) {
	got := make(chan posted, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/events.k8s.io/v1/namespaces/ns/events" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		p := posted{contentType: r.Header.Get("Content-Type"), err: err}
		if err == nil {
			_, _, p.err = clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, &p.event)
		}
		got <- p
		w.Header().Set("Content-Type", p.contentType)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec, stop, err := eventRecorder(ctx, &rest.Config{Host: srv.URL}, clientgoscheme.Scheme, "vacuum-operator", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	rec.Eventf(pod, nil, corev1.EventTypeNormal, "PodCreated", "Create", "created pod %s", "p")

	select {
	case p := <-got:
		if p.contentType != runtime.ContentTypeProtobuf {
			t.Errorf("event sent as %q, want %q", p.contentType, runtime.ContentTypeProtobuf)
		}
		if p.err != nil {
			t.Fatalf("decode the posted event: %v", p.err)
		}
		if p.event.Reason != "PodCreated" || p.event.Note != "created pod p" || p.event.Regarding.Name != "p" ||
			p.event.ReportingController != "vacuum-operator" {
			t.Errorf("posted event = reason %q note %q regarding %q controller %q, want PodCreated, \"created pod p\", p, vacuum-operator",
				p.event.Reason, p.event.Note, p.event.Regarding.Name, p.event.ReportingController)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event reached the API server in 30 s")
	}
}
