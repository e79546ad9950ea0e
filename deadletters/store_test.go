package deadletters

import (
	"testing"
	"time"
)

// A mark applies to the letter it was made for, and not to a letter at the same offset of a
// topic deleted and re-created under the same name (another topic ID, another timestamp, another
// cdc-lsn). Marks of the version before topic_id and letter_time apply only with the same outbox
// id and only if they are not older than the letter.
func TestMarkAppliesToItsLetterOnly(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	l := &Letter{OutboxID: "1", TopicID: "id-b", LSN: "0/20", Seen: t0}
	for _, c := range []struct {
		name string
		m    mark
		want bool
	}{
		{"its own mark", mark{topicID: "id-b", letterTime: at(0), lsn: "0/20", at: t0.Add(time.Minute)}, true},
		{"the old topic's mark", mark{topicID: "id-a", letterTime: at(-time.Hour), lsn: "0/10", at: t0.Add(-time.Minute)}, false},
		{"another topic ID, the same timestamp", mark{topicID: "id-a", letterTime: at(0), at: t0}, false},
		{"another cdc-lsn", mark{topicID: "id-b", letterTime: at(0), lsn: "0/10", at: t0}, false},
		{"no topic ID on either side: the timestamp", mark{letterTime: at(0), at: t0}, false}, // l has a topic ID
		{"an older version's mark, made after the letter", mark{outboxID: "1", at: t0.Add(time.Second)}, true},
		{"an older version's mark, made before the letter", mark{outboxID: "1", at: t0.Add(-time.Second)}, false},
		{"an older version's mark of another outbox id", mark{outboxID: "2", at: t0.Add(time.Second)}, false},
	} {
		if got := c.m.marks(l); got != c.want {
			t.Errorf("%s: marks = %v, want %v", c.name, got, c.want)
		}
	}
	noID := &Letter{OutboxID: "1", Seen: t0}
	if !(mark{letterTime: at(0), at: t0}).marks(noID) || (mark{letterTime: at(time.Millisecond), at: t0}).marks(noID) {
		t.Error("a broker without topic IDs: the record's timestamp tells letters apart")
	}
}
