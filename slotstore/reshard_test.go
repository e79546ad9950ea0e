package slotstore

import (
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestOtherGenerationsAreThePlainSlotAndShardsOfAnotherCount(t *testing.T) {
	slots := []string{"cdc_s0of3", "cdc", "cdc_s1of2", "cdc_s2of3", "cdc_s0of2", "cdcx", "cdc_s1of3", "other_s0of2", "cdc_s01of2"}
	if got, want := OtherGenerations(slots, "cdc", 3), []string{"cdc", "cdc_s0of2", "cdc_s1of2"}; !slices.Equal(got, want) {
		t.Errorf("for 3 shards: %v, want %v", got, want)
	}
	if got := OtherGenerations([]string{"cdc_s0of3", "cdc_s1of3", "cdc_s2of3", "cdcx"}, "cdc", 3); len(got) != 0 {
		t.Errorf("only the generation's own slots: %v, want none", got)
	}
	if got, want := OtherGenerations(slots, "cdc", 2), []string{"cdc", "cdc_s0of3", "cdc_s1of3", "cdc_s2of3"}; !slices.Equal(got, want) {
		t.Errorf("for 2 shards: %v, want %v", got, want)
	}
}

func TestReshardFromIsTheOneOtherGenerationOrTheOneGiven(t *testing.T) {
	two := []string{"cdc_s0of2", "cdc_s1of2"}
	three := []string{"cdc_s0of3", "cdc_s1of3", "cdc_s2of3"}
	cases := []struct {
		name    string
		slots   []string
		from    int
		want    Generation
		wantErr error
	}{
		{"the plain slot", []string{"cdc"}, -1, Generation{0}, nil},
		{"two shards, the new ones made already", append(slices.Clone(two), three...), -1, Generation{2}, nil},
		{"nothing but the new generation", three, -1, Generation{}, ErrNoOldGeneration},
		{"nothing at all", nil, -1, Generation{}, ErrNoOldGeneration},
		{"two others", append([]string{"cdc"}, two...), -1, Generation{}, ErrGenerationAmbiguous},
		{"two others, --from 2", append([]string{"cdc"}, two...), 2, Generation{2}, nil},
		{"two others, --from 0", append([]string{"cdc"}, two...), 0, Generation{0}, nil},
		{"--from a generation with no slot", two, 4, Generation{4}, ErrNoOldGeneration},
	}
	for _, c := range cases {
		got, err := ReshardFrom(c.slots, "cdc", 3, c.from)
		if !errors.Is(err, c.wantErr) || (err == nil && got != c.want) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, got, err, c.want, c.wantErr)
		}
	}
}

func TestReshardStartIsTheLargestPositionOfEitherGeneration(t *testing.T) {
	if got := ReshardStart([]pglogrepl.LSN{0x300, 0x500, 0x400}, []pglogrepl.LSN{0x100, 0x200}); got != 0x500 {
		t.Errorf("new slots ahead: %s, want 0/500", got)
	}
	// An old relay that confirmed an idle keepalive's WAL end past the new slots' consistent
	// points published everything up to there: the new generation starts there, not before.
	if got := ReshardStart([]pglogrepl.LSN{0x300, 0x500}, []pglogrepl.LSN{0x100, 0x700}); got != 0x700 {
		t.Errorf("an old slot ahead: %s, want 0/700", got)
	}
}
