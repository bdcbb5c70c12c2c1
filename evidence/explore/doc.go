// Package explore runs every schedule of a bounded model of lease holders
// on a backend's real authority and receivers: workers that acquire once
// and write once, delayed between any two of their own steps, under five
// protocols (unfenced, fenced, fence before acting, guarded, and the fence
// in a user's own transaction). It checks invariants I1-I5 in every
// schedule, counts the lost updates and the gaps, and keeps the shortest
// schedule for each non-zero count. Rolling back to a branch point restores
// the store's snapshot; states reached by two prefixes are expanded once.
//
// Part of the evidence (what cmd/run-experiment reruns), not of the
// library: no API promise.
package explore
