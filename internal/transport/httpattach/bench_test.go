package httpattach_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkFanout publishes one status frame per iteration to N implicit
// SSE streams over loopback HTTP and waits until every stream has it:
// ns/op is the time to deliver one frame to all of them. bench/attach
// measures the same with 1,000 subscribers in a separate process.
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			s := newServer(b, options{})
			id := s.createSession(nil)
			c := s.subscribe(id, map[string]any{"role": "controller"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan struct{}, n)
			var ready, done sync.WaitGroup
			ready.Add(n)
			for range n {
				done.Add(1)
				go func() {
					defer done.Done()
					req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/api/headless/sessions/"+id+"/events", nil)
					resp, err := s.srv.Client().Do(req)
					if err != nil {
						b.Error(err)
						ready.Done()
						return
					}
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(make([]byte, 1<<20), 16<<20)
					first := true
					for sc.Scan() {
						l := sc.Text()
						if first && strings.HasPrefix(l, "data: ") {
							first = false
							ready.Done()
						} else if strings.Contains(l, `"message":{"type":"status"`) {
							got <- struct{}{}
						}
					}
				}()
			}
			ready.Wait()
			b.ResetTimer()
			for range b.N {
				s.mustSend(id, c.SubscriptionID, `{"type":"init"}`)
				for range n {
					select {
					case <-got:
					case <-time.After(30 * time.Second):
						b.Fatal("a frame was not delivered to every stream")
					}
				}
			}
			b.StopTimer()
			cancel()
			done.Wait()
		})
	}
}
