package main

import (
	"io"
	"log/slog"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// Caught up, run uses one processor; a drain that lasts raiseProcsAfter gets Go's default, a
// shorter one (a steady load's) does not; GOMAXPROCS in the environment turns all that off.
func TestRunUsesOneProcessorUnlessADrainLasts(t *testing.T) {
	t.Cleanup(runtime.SetDefaultGOMAXPROCS)
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	if f := newDrainProcs(func(string) string { return "2" }, log); f != nil || runtime.GOMAXPROCS(0) != def {
		t.Fatalf("with GOMAXPROCS set: OnDrain %v, GOMAXPROCS %d (want nil and %d, untouched)", f != nil, runtime.GOMAXPROCS(0), def)
	}
	if def <= 1 {
		if newDrainProcs(func(string) string { return "" }, log) != nil {
			t.Fatal("on one CPU there is nothing to switch, but an OnDrain was returned")
		}
		return
	}
	synctest.Test(t, func(t *testing.T) {
		want := func(what string, n int) {
			t.Helper()
			synctest.Wait()
			if got := runtime.GOMAXPROCS(0); got != n {
				t.Fatalf("%s: GOMAXPROCS %d, want %d", what, got, n)
			}
		}
		f := newDrainProcs(func(string) string { return "" }, log)
		if f == nil {
			t.Fatal("no OnDrain on a machine of several CPUs")
		}
		want("caught up at the start", 1)
		f(true)
		time.Sleep(raiseProcsAfter / 2)
		want("early in a drain", 1)
		f(false)
		time.Sleep(raiseProcsAfter)
		want("after a short drain", 1)
		f(true)
		time.Sleep(raiseProcsAfter)
		want("in a drain that lasted", def)
		f(false)
		want("caught up again", 1)
	})
}
