package hashring

import (
	"fmt"
	"testing"
)

func TestOwnerIndependentOfOrder(t *testing.T) {
	a := []string{"r1", "r2", "r3"}
	b := []string{"r3", "r1", "r2"}
	for i := 0; i < 1000; i++ {
		k := fmt.Sprintf("user-%d", i)
		if Owner(k, a) != Owner(k, b) {
			t.Fatalf("owner of %s depends on member order", k)
		}
		if r := Rank(k, b); r[0] != Owner(k, a) {
			t.Fatalf("Rank(%s)[0] = %s, Owner = %s", k, r[0], Owner(k, a))
		}
	}
	if Owner("x", nil) != "" {
		t.Fatal("Owner of empty set must be empty")
	}
}

// Removing a member moves only its keys, to the member ranked second.
func TestMinimalMovement(t *testing.T) {
	all := []string{"10.0.0.1:9000", "10.0.0.2:9000", "10.0.0.3:9000", "10.0.0.4:9000"}
	without := []string{"10.0.0.1:9000", "10.0.0.2:9000", "10.0.0.4:9000"}
	moved, held := 0, map[string]int{}
	const n = 20000
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("tenant-%d", i)
		before, after := Owner(k, all), Owner(k, without)
		held[before]++
		if before != after {
			moved++
			if before != "10.0.0.3:9000" {
				t.Fatalf("key %s moved from %s, which is still a member", k, before)
			}
			if r := Rank(k, all); r[1] != after {
				t.Fatalf("key %s went to %s, want the second-ranked %s", k, after, r[1])
			}
		}
	}
	if moved != held["10.0.0.3:9000"] {
		t.Fatalf("moved %d keys, the removed member held %d", moved, held["10.0.0.3:9000"])
	}
	for m, c := range held {
		if c < n/4*8/10 || c > n/4*12/10 {
			t.Errorf("member %s holds %d of %d keys; want within 20%% of %d", m, c, n, n/4)
		}
	}
}
