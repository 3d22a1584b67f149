package runtime

import (
	"context"

	"github.com/toolplane/toolplane/services/runtime/runtimeloop"
)

// visionModels reports whether any runtime.loop.models entry has
// supports_vision: then assembly binds view_image, and the agent loop keeps
// it only on turns of such a model (docs/deerflow.md §1.6).
func (c *LoopConfig) visionModels() bool {
	for _, m := range c.Models {
		if m.SupportsVision {
			return true
		}
	}
	return false
}

// ViewedImages implements runtimeloop.ImageSource over the thread
// workspace's viewed-image records (runtimetools/view_image.go).
func (a loopAdapter) ViewedImages(_ context.Context, threadID string, callIDs []string) (map[string]*runtimeloop.Image, error) {
	recs, err := a.s.ws.ViewedImages(threadID, callIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*runtimeloop.Image, len(recs))
	for id, r := range recs {
		out[id] = &runtimeloop.Image{Path: r.Path, MIMEType: r.MIMEType, Data: r.Data}
	}
	return out, nil
}
