package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"time"
)

// Progress for calls that wait: on a terminal, a call still running after
// progressDelay shows one self-rewriting stderr line with the method and
// the elapsed time, erased when the call ends; when stderr is not a
// terminal (piped, redirected, CI) nothing is printed.
var (
	progressDelay = time.Second
	progressOut   io.Writer // nil = os.Stderr when it is a terminal
	progressTick  = 250 * time.Millisecond
)

// stderrIsTerminal reports whether stderr is a character device (a
// terminal) and TERM is not "dumb".
func stderrIsTerminal() bool {
	if os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startProgress starts the indicator for one call; the returned stop is
// safe to call once.
func startProgress(method string) (stop func()) {
	w := progressOut
	if w == nil {
		if !stderrIsTerminal() {
			return func() {}
		}
		w = os.Stderr
	}
	label := path.Base(method) // "/pkg.Service/Method" -> "Method"
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		begin := time.Now()
		select {
		case <-done:
			return
		case <-time.After(progressDelay):
		}
		frames := []string{"|", "/", "-", `\`}
		t := time.NewTicker(progressTick)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r\033[K%s waiting for %s ... %ds", frames[i%len(frames)], label, int(time.Since(begin).Seconds()))
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}
