package outbox

import (
	"errors"
	"reflect"
	"testing"
)

func TestTopicTemplateReplacesEachPlaceholderByItsColumn(t *testing.T) {
	for _, c := range []struct {
		tmpl string
		cols []string
		vals []string
		want string
	}{
		{"outbox.event.${aggregatetype}", []string{"aggregatetype"}, []string{"Order"}, "outbox.event.Order"},
		{"${a}", []string{"a"}, []string{"x"}, "x"},
		{"$x.${a}-${b}.$", []string{"a", "b"}, []string{"1", "2"}, "$x.1-2.$"},
		{"${a}${a}", []string{"a", "a"}, []string{"z", "z"}, "zz"},
	} {
		tt, err := ParseTopicTemplate(c.tmpl)
		if err != nil {
			t.Fatalf("%q: %v", c.tmpl, err)
		}
		if !reflect.DeepEqual(tt.Columns(), c.cols) {
			t.Errorf("%q: columns %q, want %q", c.tmpl, tt.Columns(), c.cols)
		}
		vals := make([][]byte, len(c.vals))
		for i, v := range c.vals {
			vals[i] = []byte(v)
		}
		if got := string(tt.Append(nil, vals)); got != c.want {
			t.Errorf("%q: topic %q, want %q", c.tmpl, got, c.want)
		}
	}
	for _, bad := range []string{"", "plain", "a.${", "a.${}", "a.${b"} {
		if _, err := ParseTopicTemplate(bad); !errors.Is(err, ErrBadTopicTemplate) {
			t.Errorf("%q: err = %v, want ErrBadTopicTemplate", bad, err)
		}
	}
}
