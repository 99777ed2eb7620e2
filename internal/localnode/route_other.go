//go:build !linux

package localnode

import "net/netip"

// ensureLocalRoute: only Linux can make a range local; elsewhere pods get loopback addresses.
func ensureLocalRoute(netip.Prefix) error { return errRouteNotPermitted }

// deleteLocalRoute has nothing to delete off Linux.
func deleteLocalRoute(netip.Prefix) error { return nil }

// hasLocalRoute is always false off Linux.
func hasLocalRoute(netip.Prefix) (bool, error) { return false, nil }
