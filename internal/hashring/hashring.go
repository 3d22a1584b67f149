// Package hashring places a key on one member of a changing set by
// rendezvous (highest-random-weight) hashing: every member scores the key,
// the highest score wins. Removing a member moves only the keys it held;
// adding one moves only the keys it now wins (about 1/n of them). There is
// no ring state to keep in sync: two processes that see the same members
// pick the same owner. See docs/decisions/0086-session-placement.md.
package hashring

import (
	"hash/fnv"
	"sort"
)

// score is a 64-bit FNV-1a of member, a zero byte, then key, finished with
// the splitmix64 mixer so that members with similar names still spread keys
// evenly.
func score(member, key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Owner returns the member that owns key, or "" when members is empty.
// Ties (equal scores) go to the lexically smaller member, so the result does
// not depend on the order of members.
func Owner(key string, members []string) string {
	best, bestScore := "", uint64(0)
	for i, m := range members {
		s := score(m, key)
		if i == 0 || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// Rank returns members ordered by preference for key: the owner first, then
// the member that takes over when the owner is gone, and so on. The input
// slice is not modified.
func Rank(key string, members []string) []string {
	out := append([]string(nil), members...)
	scores := make(map[string]uint64, len(out))
	for _, m := range out {
		scores[m] = score(m, key)
	}
	sort.SliceStable(out, func(i, j int) bool {
		si, sj := scores[out[i]], scores[out[j]]
		if si != sj {
			return si > sj
		}
		return out[i] < out[j]
	})
	return out
}
