package runtime

// SetLoopConfigForTest makes every Server built afterwards use c as
// runtime.loop (nil restores the service config). Tests only.
func SetLoopConfigForTest(c *LoopConfig) { loopConfigOverride.Store(c) }
