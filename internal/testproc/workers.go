package testproc

import "sync"

// Workers starts n goroutines that each call work again and again, with w the goroutine's
// number (0 to n-1) and i how many calls it made before, until work returns false or stop is
// called. stop tells them all to end after the call they are in and waits until they have; it
// may be called more than once. It is the load a concurrency test runs while it changes what
// the work meets.
func Workers(n int, work func(w, i int) bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if !work(w, i) {
					return
				}
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
