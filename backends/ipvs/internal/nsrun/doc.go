// Package nsrun runs functions inside a named network namespace
// (/run/netns/NAME), for the parts of the IPVS backend that have no
// per-namespace handle: exec'ed tools (ipset) and /proc/sys.
package nsrun
