package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/testkit/testenv"
)

// A publication that publishes more than inserts is accepted, never silently: slot create
// leaves it as it is and says how to make it insert-only, and run warns at start naming the
// operations it ignores and the same fix.
func TestCLIPublicationPublishingMoreIsAcceptedWithAWarning(t *testing.T) {
	t.Parallel()
	e := testenv.NewRelayEnv(t, true)
	if _, err := e.F.Pool.Exec(context.Background(), `ALTER PUBLICATION `+e.F.Publication+` SET (publish = 'insert, update, delete')`); err != nil {
		t.Fatal(err)
	}
	fix := "ALTER PUBLICATION \"" + e.F.Publication + "\" SET (publish = 'insert')"
	out, errOut, code := testenv.Run(t, 30*time.Second, e.Bin, e.Env, "slot", "create", "--table", e.F.Table)
	if code != 0 || !strings.Contains(errOut, "publishes update, delete besides inserts") || !strings.Contains(errOut, fix) {
		t.Errorf("slot create on a publication that publishes updates and deletes: exit %d, want 0 with a note naming them and %s:\n%s%s",
			code, fix, out, errOut)
	}
	var upd bool
	if err := e.F.Pool.QueryRow(context.Background(), `SELECT pubupdate FROM pg_publication WHERE pubname = $1`, e.F.Publication).Scan(&upd); err != nil || !upd {
		t.Errorf("slot create changed the publication's publish option (pubupdate %v, %v): another consumer may need it", upd, err)
	}
	p := e.Start(t, nil, "--metrics-addr", "")
	testenv.Eventually(t, 60*time.Second, "run's start", func() bool { return strings.Contains(p.Output(), "starting") || p.Exited() })
	o := p.Output()
	if !strings.Contains(o, "the publication publishes operations the relay ignores") || !strings.Contains(o, `ignored="update, delete"`) ||
		!strings.Contains(o, "SET (publish = 'insert')") {
		t.Errorf("run on a publication that publishes updates and deletes: no warning naming them and the fix:\n%s", o)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d\n%s", code, p.Output())
	}
}
