package localnode

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// localRoute is the route that makes prefix local to the host: in the local table, on lo,
// scope host, marked with routeProtocol.
func localRoute(prefix netip.Prefix) (*netlink.Route, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("find the loopback interface: %w", err)
	}
	return &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: ipNet(prefix), Type: unix.RTN_LOCAL,
		Table: unix.RT_TABLE_LOCAL, Scope: netlink.SCOPE_HOST, Protocol: routeProtocol}, nil
}

// ensureLocalRoute adds the local route of prefix unless it is there; it refuses a range
// that overlaps an address or a route the host already has (other than its default route).
func ensureLocalRoute(prefix netip.Prefix) error {
	want, err := localRoute(prefix)
	if err != nil {
		return err
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			continue // a default route
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		other := netip.PrefixFrom(dst.Unmap(), ones)
		if !other.Overlaps(prefix) {
			continue
		}
		if r.Table == unix.RT_TABLE_LOCAL && r.Type == unix.RTN_LOCAL && int(r.Protocol) == routeProtocol && other == prefix {
			return nil // ours, or one left by a node that died: taken over
		}
		return fmt.Errorf("pod range %s overlaps the host's route to %s (table %d): choose another range with %s", prefix, other, r.Table, PodCIDREnv)
	}
	if err := netlink.RouteAdd(want); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return nil // another node of the range added it meanwhile
		}
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			return fmt.Errorf("route %s to lo: %w", prefix, errRouteNotPermitted)
		}
		return fmt.Errorf("route %s to lo: %w", prefix, err)
	}
	return nil
}

// deleteLocalRoute deletes the local route of prefix; a route already gone is no error.
func deleteLocalRoute(prefix netip.Prefix) error {
	r, err := localRoute(prefix)
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("delete the route of pod range %s: %w", prefix, err)
	}
	return nil
}

// hasLocalRoute reports whether the local route of prefix is there (for tests).
func hasLocalRoute(prefix netip.Prefix) (bool, error) {
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_LOCAL}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return false, fmt.Errorf("list the local routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Type != unix.RTN_LOCAL || int(r.Protocol) != routeProtocol {
			continue
		}
		if ones, _ := r.Dst.Mask.Size(); ones == prefix.Bits() && r.Dst.IP.Equal(prefix.Addr().AsSlice()) {
			return true, nil
		}
	}
	return false, nil
}
