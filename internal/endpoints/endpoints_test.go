package endpoints

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func slice(name string, typ discoveryv1.AddressType, portName string, port int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, AddressType: typ,
		Ports:     []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port)}},
		Endpoints: eps}
}

func ep(addr string, ready, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
}

func TestReadyTakesTheFirstReadyAddressAtTheEndpointsTargetPort(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	for _, tc := range []struct {
		name     string
		items    []discoveryv1.EndpointSlice
		portName string
		want     string
		port     int32
		ok       bool
	}{
		{"not ready skipped", []discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, "pg", 15432,
			ep("10.0.0.1", no, nil), ep("10.0.0.3", yes, nil), ep("10.0.0.2", yes, nil))}, "pg", "10.0.0.2", 15432, true},
		{"terminating skipped, nil ready is ready", []discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, "", 5432,
			ep("10.0.0.1", yes, yes), ep("10.0.0.5", nil, nil))}, "", "10.0.0.5", 5432, true},
		{"other port name skipped", []discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, "metrics", 9187,
			ep("10.0.0.1", yes, nil))}, "pg", "", 0, false},
		{"FQDN skipped, slices by name", []discoveryv1.EndpointSlice{
			slice("c", discoveryv1.AddressTypeIPv6, "pg", 5432, ep("fd00::7", yes, nil)),
			slice("b", discoveryv1.AddressTypeFQDN, "pg", 5432, ep("db.example", yes, nil)),
		}, "pg", "fd00::7", 5432, true},
		{"none ready", []discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4, "pg", 5432,
			ep("10.0.0.1", no, nil))}, "pg", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip, port, ok := Ready(tc.items, tc.portName)
			if ip != tc.want || port != tc.port || ok != tc.ok {
				t.Errorf("Ready = %q %d %v, want %q %d %v", ip, port, ok, tc.want, tc.port, tc.ok)
			}
		})
	}
}
