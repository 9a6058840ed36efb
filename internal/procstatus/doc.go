// Package procstatus reads this process's memory figures from
// /proc/self/status (VmRSS, RssAnon, VmHWM, ...) and resets its peak, for
// the benchmarks and harnesses that report them.
package procstatus
