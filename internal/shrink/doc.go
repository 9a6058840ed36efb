// Package shrink gives back the memory a Go map keeps after mass
// deletions. A Go map never releases the space of deleted entries: after
// 10,000 Services are created and deleted, every map that held one entry
// per service port stays sized for 10,000. Long-lived maps (the change
// trackers' state, a backend's record of what it installed) pass through
// Map after each batch of changes, which copies a map into one sized for
// its current entries once it has fallen far below its high-water mark.
package shrink
