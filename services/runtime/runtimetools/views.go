package runtimetools

import "sync"

// viewMemo remembers the catalog's candidate view id of a deferred set
// (docs/decisions/0144-candidate-views.md), keyed by the set's content key
// (runtimeassembly.Base.ViewKey), so tool_search sends the id instead of
// every deferred name. An id is only ever learned from a catalog response,
// so a catalog that does not know candidate views (v0.1.0) is always sent
// the names; an id the catalog has forgotten is dropped and the names are
// resent. The memo is bounded: it is cleared when it reaches maxViewMemo
// entries (the ids are relearned on the next search of each set).
type viewMemo struct {
	mu  sync.Mutex
	ids map[string]string
}

// maxViewMemo bounds the remembered ids (one per distinct deferred set).
const maxViewMemo = 4096

func (m *viewMemo) get(key string) string {
	if key == "" {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids[key]
}

func (m *viewMemo) put(key, id string) {
	if key == "" || id == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil || len(m.ids) >= maxViewMemo {
		m.ids = make(map[string]string)
	}
	m.ids[key] = id
}

func (m *viewMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ids, key)
}
