package etcd

// ReadFirst makes s read every key before its first transaction instead of
// guessing from its cache: the design the cache is measured against.
func ReadFirst(s *Store) *Store {
	s.optimistic = false
	return s
}
