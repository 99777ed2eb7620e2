// Package endpoints picks one ready endpoint of a Service from its EndpointSlices, as the
// operator does for an online run's server and the local node does for the Service
// environment variables of its pods: neither relies on cluster DNS or on kube-proxy.
package endpoints

import (
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// Ready returns the first ready endpoint address of items on the Service port named
// portName ("" for an unnamed port), with the endpoint's target port: slices by name, then
// addresses in order, so repeated calls agree. A nil ready condition counts as ready (the
// EndpointSlice API's rule); a terminating endpoint never does; FQDN slices are skipped
// (they would need DNS). ok is false when no endpoint is ready.
func Ready(items []discoveryv1.EndpointSlice, portName string) (ip string, port int32, ok bool) {
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, sl := range sorted {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var target int32
		for _, p := range sl.Ports {
			if ptr.Deref(p.Name, "") == portName && ptr.Deref(p.Protocol, corev1.ProtocolTCP) == corev1.ProtocolTCP && p.Port != nil {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		var addrs []string
		for _, ep := range sl.Endpoints {
			if !ptr.Deref(ep.Conditions.Ready, true) || ptr.Deref(ep.Conditions.Terminating, false) {
				continue
			}
			addrs = append(addrs, ep.Addresses...)
		}
		slices.Sort(addrs)
		for _, a := range addrs {
			if parsed := net.ParseIP(a); parsed != nil {
				return parsed.String(), target, true
			}
		}
	}
	return "", 0, false
}
