// Package synctrace records where one sync's time goes, phase by phase,
// for the log line the proxier writes at verbosity 4 ("Sync trace"). A
// trace rides in the sync's context; backends mark the end of their
// phases (render, commit) without knowing whether anyone traces.
package synctrace
