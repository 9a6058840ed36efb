package proxier

// invalidReasons are the kind and reason labels switchyard_invalid_objects_total
// takes: every object the trackers skip as malformed is counted under one
// of them. Their series start at 0 (InitInvalidReasons), so the first
// skip shows as an increase to rate() and increase() (and alerts on them),
// not as a series that appears already at 1. TestInvalidReasonsListed
// checks the trackers name no other.
var invalidReasons = [][2]string{
	{"Endpoint", "address"},
	{"EndpointSlice", "port"},
	{"EndpointSlice", "protocol"},
	{"EndpointSlice", "service-name"},
	{"Service", "cluster-ip"},
	{"Service", "duplicate-port"},
	{"Service", "external-ip"},
	{"Service", "loadbalancer-ip"},
	{"Service", "port"},
	{"Service", "source-range"},
}
