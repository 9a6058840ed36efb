package nftables

// SetChunkObjects sets how many rules and elements a transaction of a
// chunked first sync carries, and returns a function restoring it.
func SetChunkObjects(n int) (restore func()) {
	old := chunkObjects
	chunkObjects = n
	return func() { chunkObjects = old }
}
